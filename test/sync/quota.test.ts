import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storedState } from '../storage/storage-helpers.js';
import { createRepo, passwordAuth, pullAndWait, startSyncEnv, type SyncEnv } from './fixtures.js';

/**
 * A pull adds objects: the org quota (API §12 QUOTA_EXCEEDED) refuses one that does not fit. The
 * upstream is one commit of 3,000 files of 100 random bytes (about 420 KB of objects), more than
 * one storage batch (2,000 objects), against a quota of 370 KB: the first batch fits, the second
 * does not, and the first must be taken back.
 */
const QUOTA = 370_000;
let env: SyncEnv;
let work: string;
let url: string;

t.before(async () => {
  env = await startSyncEnv({ env: { REPOHOST_ORG_QUOTA_BYTES: String(QUOTA) } });
  url = await env.git.createRepo('many');
  work = mkdtempSync(join(tmpdir(), 'repohost-work-'));
  const g = (args: string[]): Promise<string> => env.git.gitIn(work, args);
  await g(['init', '--quiet', '-b', 'main']);
  for (let d = 0; d < 30; d++) {
    mkdirSync(join(work, `d${d}`));
    for (let f = 0; f < 100; f++) writeFileSync(join(work, `d${d}`, `f${f}.txt`), randomBytes(50).toString('hex'));
  }
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', 'many files']);
  await g(['push', '--quiet', join(env.git.root, 'many.git'), 'main']);
});
t.teardown(async () => {
  rmSync(work, { recursive: true, force: true });
  await env.close();
});

t.test('quota - a pull whose objects do not fit fails with QUOTA_EXCEEDED and keeps nothing, not even its first batches', async (t) => {
  const orgId = (await env.s.api('GET', '/acme')).json.id as string;
  const repo = await createRepo(env.s, 'mirror', { url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'mirror');
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 1, 'a full quota is not retried');
  t.match(sync.error, /QUOTA_EXCEEDED: the org's storage quota is full/);
  const changes = await env.s.api('GET', '/acme/mirror/changes');
  t.same(changes.json.changes, [], 'no change was imported');
  const main = await env.s.api('GET', '/acme/mirror/bookmarks/main');
  t.equal(main.json.change_id, 'z'.repeat(32), 'the default bookmark did not move');

  await env.s.stop();
  const state = storedState(env.s.dataDir, orgId, repo.id);
  t.same(state.objects, [], 'no object is left: the batch that fitted was taken back');
  t.same(state.pending, []);
  t.notOk(state.orgBytes, 'nothing is counted');
  await env.s.restart();
});
