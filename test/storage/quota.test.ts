import t from 'tap';
import { serverForFile, type TestServer } from '../helpers/server.js';
import { ROOT, createRepo, noise, storedState, uploadBlob, writeBinary } from './storage-helpers.js';

/**
 * The org storage quota (API §12 QUOTA_EXCEEDED, §13 REPOHOST_ORG_QUOTA_BYTES) through the API:
 * 64 KiB per org, writes of 12 KiB files.
 */
const QUOTA = 64 * 1024;
const FILE = 12 * 1024;

let s: TestServer;
t.before(async () => {
  s = await serverForFile(t, { env: { REPOHOST_ORG_QUOTA_BYTES: String(QUOTA) } });
});

async function changeCount(repo: string): Promise<number> {
  const res = await s.api('GET', `/${s.org}/${repo}/changes?limit=200`);
  return res.json.changes.length as number;
}

t.test('quota - writes succeed until the org is full, then 413 QUOTA_EXCEEDED saves nothing; metadata writes still work; a deleted repository frees its bytes; the counter survives a restart', async (t) => {
  const orgId = (await s.api('GET', `/${s.org}`)).json.id as string;
  await createRepo(s, 'first');
  const secondId = await createRepo(s, 'second');

  // `first` takes two files, `second` fills the rest.
  let base = ROOT;
  for (let i = 0; i < 2; i++) {
    const res = await writeBinary(s, 'first', base, `f${i}.bin`, noise(FILE));
    t.equal(res.status, 201, res.text);
    base = res.json.change.id;
  }
  base = ROOT;
  let accepted = 0;
  let refused = null as Awaited<ReturnType<typeof writeBinary>> | null;
  for (let i = 0; i < 10 && !refused; i++) {
    const res = await writeBinary(s, 'second', base, `s${i}.bin`, noise(FILE), { bookmarks: [{ name: 'main' }] });
    if (res.status === 413) refused = res;
    else {
      t.equal(res.status, 201, res.text);
      base = res.json.change.id;
      accepted++;
    }
  }
  t.ok(refused, 'a write is refused once the quota is reached');
  t.equal(accepted, 3, 'the org took 5 files of 12 KiB (plus trees and commits); the 6th would overflow 64 KiB');
  t.equal(refused!.json.error.code, 'QUOTA_EXCEEDED');
  t.match(refused!.json.error.message, /quota is full/);
  t.equal(refused!.json.error.details.quota_bytes, QUOTA);
  t.ok(refused!.json.error.details.used_bytes + refused!.json.error.details.requested_bytes > QUOTA);

  // Nothing of the refused write was saved.
  const head = base;
  t.equal(await changeCount('second'), 3, 'no change was created');
  const missing = await s.api('GET', `/${s.org}/second/content?path=s3.bin`);
  t.equal(missing.status, 404, 'the file is not there');
  t.equal((await s.api('GET', `/${s.org}/second/bookmarks/main`)).json.change_id, head, 'the bookmark did not move');

  // Every write that adds objects is refused the same way; a declared upload at the front door.
  const blob = await uploadBlob(s, 'second', noise(FILE));
  t.equal(blob.status, 413);
  t.equal(blob.json.error.code, 'QUOTA_EXCEEDED');
  const patch = await s.api('PATCH', `/${s.org}/second/changes/${head}`, { body: { files: [{ path: 'p.bin', content: noise(FILE).toString('base64') }] } });
  t.equal(patch.status, 413, patch.text);
  t.equal(patch.json.error.code, 'QUOTA_EXCEEDED');

  // Metadata-only writes are never refused.
  const created = await s.api('POST', `/${s.org}/second/bookmarks`, { body: { name: 'keep', change_id: head } });
  t.equal(created.status, 201, created.text);
  const previous = (await s.api('GET', `/${s.org}/second/changes/${head}`)).json.parents[0];
  const moved = await s.api('PATCH', `/${s.org}/second/bookmarks/keep`, { body: { change_id: previous, allow_backwards: true } });
  t.equal(moved.status, 200, moved.text);
  const renamed = await s.api('PATCH', `/${s.org}/second`, { body: { tags: { team: 'storage' } } });
  t.equal(renamed.status, 200, renamed.text);

  // The counter is durable: after a restart the org is still full.
  await s.stop();
  const full = storedState(s.dataDir, orgId, secondId);
  t.ok(full.orgBytes > QUOTA - FILE && full.orgBytes <= QUOTA, `the org counter (${full.orgBytes}) is near the quota, never over`);
  t.ok(full.repoBytes! > 2 * FILE, 'the repository has its own counter');
  await s.restart();
  const again = await writeBinary(s, 'second', head, 'again.bin', noise(FILE));
  t.equal(again.status, 413, 'still full after the restart');

  // Deleting `first` gives its two files back: the refused write fits now.
  t.equal((await s.api('DELETE', `/${s.org}/first`)).status, 200);
  const fits = await writeBinary(s, 'second', head, 'again.bin', noise(FILE));
  t.equal(fits.status, 201, fits.text);
});

t.test('quota - concurrent writes to several repositories never take the org over its quota', async (t) => {
  const org = 'racers';
  s.createOrg(org);
  const key = s.createKey({ org, scopes: ['admin'], name: 'racer' });
  const token = await s.token({ key, issuer: org });
  const repos = ['r0', 'r1', 'r2', 'r3'];
  for (const name of repos) t.equal((await s.api('POST', `/${org}/repos`, { token, body: { name } })).status, 201);
  const orgId = (await s.api('GET', `/${org}`, { token })).json.id as string;
  const results = await Promise.all(
    Array.from({ length: 16 }, (_, i) =>
      s.api('POST', `/${org}/${repos[i % repos.length]}/apply-ops`, {
        token,
        body: { base_change_id: ROOT, ops: [{ op: 'write', path: `w${i}.bin`, content: noise(10 * 1024).toString('base64'), encoding: 'base64' }] },
      }),
    ),
  );
  const statuses = results.map((r) => r.status);
  t.ok(statuses.every((c) => c === 201 || c === 413), `only successes and quota refusals: ${statuses.join(',')}`);
  const ok = statuses.filter((c) => c === 201).length;
  t.ok(ok >= 5 && ok <= 6, `${ok} writes of 10 KiB fit in 64 KiB`);
  await s.stop();
  const state = storedState(s.dataDir, orgId, '-');
  t.ok(state.orgBytes <= QUOTA, `the counter (${state.orgBytes}) is within the quota`);
  await s.restart();
});
