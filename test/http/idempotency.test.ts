import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { loadLegacyOutcome, loadOutcome } from '../../src/storage/idempotency-store.js';
import { K } from '../../src/storage/keys.js';
import { SecretBox } from '../../src/storage/secret-box.js';
import { orgShard, repoShard } from '../../src/storage/shards.js';
import { requestFingerprint } from '../../src/http/idempotency-gate.js';

/** Idempotency-Key (API §1): a repeat replays the first response and applies nothing again. */
const s = await serverForFile(t);

const createWithKey = (key: string, body: unknown, token?: string) => s.api('POST', '/acme/repos', { body, token, headers: { 'idempotency-key': key } });
const repoCount = async (): Promise<number> => (await s.api('GET', '/acme')).json.num_repos;
const orgId: string = (await s.api('GET', '/acme')).json.id;
const secrets = SecretBox.forDataDir(s.dataDir);

/** Runs `fn` on the server's data directory, opened beside the running server. */
async function withStorage<T>(fn: (storage: Storage) => T | Promise<T>): Promise<T> {
  const storage = openStorage(s.dataDir);
  try {
    return await fn(storage);
  } finally {
    await storage.close();
  }
}

/** A new repository whose shard is not the org's (so a record's shard tells which actor wrote it). */
async function repoOffTheOrgShard(prefix: string): Promise<{ id: string; name: string }> {
  for (let i = 0; ; i++) {
    const created = await s.api('POST', '/acme/repos', { body: { name: `${prefix}-${i}` } });
    if (repoShard(created.json.id) !== orgShard(orgId)) return { id: created.json.id, name: created.json.name };
  }
}

const ROOT = 'z'.repeat(32);
const bookmarkNames = async (repo: string): Promise<string[]> => (await s.api('GET', `/acme/${repo}/bookmarks`)).json.bookmarks.map((b: { name: string }) => b.name).sort();
const changeCount = async (repo: string): Promise<number> => (await s.api('GET', `/acme/${repo}/changes`)).json.changes.length;

t.test('idempotency - the same key and body twice creates one repository and answers the same twice', async (t) => {
  const before = await repoCount();
  // No name: without the key a repeat would create a second, differently named repository.
  const first = await createWithKey('create-1', {});
  const second = await createWithKey('create-1', {});
  t.equal(first.status, 201);
  t.equal(second.status, 201);
  t.equal(second.text, first.text, 'byte-identical body');
  t.equal(await repoCount(), before + 1);
  const viaApiPrefix = await fetch(`${s.url}/api/v1/acme/repos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await s.token()}`, 'content-type': 'application/json', 'idempotency-key': 'create-1' },
    body: '{}',
  });
  t.equal(viaApiPrefix.status, 201);
  t.equal(await viaApiPrefix.text(), first.text, '/api/v1 is the same route');
  t.equal(await repoCount(), before + 1);
});

t.test('idempotency - concurrent repeats of one key apply once and all get the first response', async (t) => {
  const before = await repoCount();
  const token = await s.token();
  const results = await Promise.all(Array.from({ length: 20 }, () => createWithKey('concurrent-1', { tags: { run: 'parallel' } }, token)));
  t.ok(results.every((r) => r.status === 201), results.map((r) => r.status).join(','));
  t.equal(new Set(results.map((r) => r.text)).size, 1, 'one body for all');
  t.equal(await repoCount(), before + 1, 'exactly one repository');
});

t.test('idempotency - the same key with another body, path or method is 409 ABORTED and changes nothing', async (t) => {
  const first = await createWithKey('reuse-1', { name: 'idem-a' });
  t.equal(first.status, 201);
  const before = await repoCount();
  const other = await createWithKey('reuse-1', { name: 'idem-b' });
  t.equal(other.status, 409);
  t.equal(other.json.error.code, 'ABORTED');
  t.match(other.json.error.message, /Idempotency-Key/);
  const patch = await s.api('PATCH', '/acme/idem-a', { body: { name: 'idem-a' }, headers: { 'idempotency-key': 'reuse-1' } });
  t.equal(patch.status, 409, 'another route under the same key');
  t.equal(await repoCount(), before);
  t.equal((await s.api('GET', '/acme/idem-b')).status, 404);
  const replay = await createWithKey('reuse-1', { name: 'idem-a' });
  t.equal(replay.status, 201, 'the original request still replays after the conflict');
  t.equal(replay.text, first.text);
});

t.test('idempotency - keys are scoped to the signing key', async (t) => {
  const before = await repoCount();
  const mine = await createWithKey('shared-name', {});
  const otherKey = s.createKey({ scopes: ['write'] });
  const theirs = await createWithKey('shared-name', {}, await s.token({ key: otherKey, scopes: ['write'] }));
  t.equal(mine.status, 201);
  t.equal(theirs.status, 201);
  t.not(theirs.json.id, mine.json.id, 'another key\'s request is its own');
  t.equal(await repoCount(), before + 2);
  const mineAgain = await createWithKey('shared-name', {}, await s.token({ scopes: ['admin'] }));
  t.equal(mineAgain.json.id, mine.json.id, 'another token of the same key replays');
});

t.test('idempotency - PATCH is applied once; client errors are replayed too', async (t) => {
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'idem-patch', tags: { n: '0' } } })).status, 201);
  const p1 = await s.api('PATCH', '/acme/idem-patch', { body: { name: 'idem-patched' }, headers: { 'idempotency-key': 'patch-1' } });
  t.equal(p1.status, 200);
  // Replayed by the original path: the rename is not attempted again (it would now be a 404).
  const p2 = await s.api('PATCH', '/acme/idem-patch', { body: { name: 'idem-patched' }, headers: { 'idempotency-key': 'patch-1' } });
  t.equal(p2.status, 200);
  t.equal(p2.text, p1.text);

  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'Taken-Name' } })).status, 201);
  const e1 = await createWithKey('dup-1', { name: 'taken-name' });
  t.equal(e1.status, 409);
  t.equal(e1.json.error.code, 'REPO_EXISTS');
  t.equal((await s.api('DELETE', '/acme/taken-name')).status, 200);
  const e2 = await createWithKey('dup-1', { name: 'taken-name' });
  t.equal(e2.status, 409, 'the recorded outcome is replayed, not re-run');
  t.equal(e2.text, e1.text);
  t.equal((await s.api('GET', '/acme/taken-name')).status, 404);
});

t.test('idempotency - a key over 255 characters is 400; GET ignores the header', async (t) => {
  const long = await createWithKey('k'.repeat(256), {});
  t.equal(long.status, 400);
  t.equal(long.json.error.code, 'INVALID_REQUEST');
  t.equal((await createWithKey('k'.repeat(255), {})).status, 201);
  const get1 = await s.api('GET', '/acme', { headers: { 'idempotency-key': 'get-1' } });
  t.equal(get1.status, 200);
});

t.test('idempotency - a record older than 24 h no longer binds its key', async (t) => {
  const first = await createWithKey('expiring', {});
  t.equal(first.status, 201);
  await withStorage(async (storage) => {
    const key = K.idempotency(orgShard(orgId), s.key.id, 'expiring');
    const record = storage.meta.get(key) as { status: number; at: number; sealed_body: string };
    t.equal(record.status, 201);
    t.notOk('body' in record, 'the stored response is sealed, never kept in plain text');
    t.notOk(record.sealed_body.includes(first.json.id), 'the sealed body does not show the response');
    await storage.meta.put(key, { ...record, at: Date.now() - 24 * 3600 * 1000 - 1000 });
  });
  const fresh = await createWithKey('expiring', { name: 'after-expiry' });
  t.equal(fresh.status, 201, 'another body is accepted: the old record expired');
  t.equal(fresh.json.name, 'after-expiry');
});

t.test('idempotency - a record lands on the shard of the actor that ran the request', async (t) => {
  const repo = await repoOffTheOrgShard('idem-shard');
  const write = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: { name: 'b1', change_id: ROOT }, headers: { 'idempotency-key': 'shard-1' } });
  t.equal(write.status, 201);
  const rename = await s.api('PATCH', `/acme/${repo.name}`, { body: { name: `${repo.name}-x` }, headers: { 'idempotency-key': 'shard-2' } });
  t.equal(rename.status, 200);
  await withStorage((storage) => {
    const now = Date.now();
    const at = (shard: number, key: string) => loadOutcome(storage.meta, secrets, shard, s.key.id, key, now);
    t.equal(at(repoShard(repo.id), 'shard-1')?.body, write.text, "a repository write: on the repository's shard");
    t.notOk(at(orgShard(orgId), 'shard-1'), "not on the org's");
    t.equal(at(orgShard(orgId), 'shard-2')?.body, rename.text, "a rename runs in the org's actor: on the org's shard");
    t.notOk(at(repoShard(repo.id), 'shard-2'), "not on the repository's");
    t.notOk(loadLegacyOutcome(storage, secrets, s.key.id, 'shard-1', now), 'nothing under the unsharded key');
  });
});

t.test('idempotency - a repository write repeated after a rename, a delete or a new holder of the name replays', async (t) => {
  const repo = await repoOffTheOrgShard('idem-moved');
  const headers = { 'idempotency-key': 'moved-1' };
  const bookmark = { name: 'once', change_id: ROOT };
  const first = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: bookmark, headers });
  t.equal(first.status, 201);
  const same = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: bookmark, headers });
  t.equal(same.text, first.text, 'after its own effect (the bookmark exists now)');

  t.equal((await s.api('PATCH', `/acme/${repo.name}`, { body: { name: `${repo.name}-renamed` } })).status, 200);
  const afterRename = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: bookmark, headers });
  t.equal(afterRename.status, 201, 'the old name is gone: still the stored response, not 404');
  t.equal(afterRename.text, first.text);

  // Another repository now bears the name the request addressed: the repeat must not apply to it.
  t.equal((await s.api('POST', '/acme/repos', { body: { name: repo.name } })).status, 201);
  const afterReuse = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: bookmark, headers });
  t.equal(afterReuse.text, first.text, 'the name has a new holder: replayed all the same');
  t.same(await bookmarkNames(repo.name), ['main'], 'the new holder got no bookmark');
  const other = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: { name: 'other', change_id: ROOT }, headers });
  t.equal(other.status, 409, 'another body under the key is still refused');
  t.equal(other.json.error.code, 'ABORTED');
  t.same(await bookmarkNames(`${repo.name}-renamed`), ['main', 'once'], 'applied once, where it first ran');

  // A write to the new holder, which is then deleted: its repeat still replays.
  const later = { name: 'later', change_id: ROOT };
  const second = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: later, headers: { 'idempotency-key': 'moved-2' } });
  t.equal(second.status, 201);
  t.equal((await s.api('DELETE', `/acme/${repo.name}`)).status, 200);
  const afterDelete = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: later, headers: { 'idempotency-key': 'moved-2' } });
  t.equal(afterDelete.status, 201, 'the repository is deleted: still the stored response');
  t.equal(afterDelete.text, second.text);
  const unknown = await s.api('POST', `/acme/${repo.name}/bookmarks`, { body: later, headers: { 'idempotency-key': 'moved-3' } });
  t.equal(unknown.status, 404, 'a key never used there: the repository is missing');
  t.equal(unknown.json.error.code, 'REPO_NOT_FOUND');
});

t.test('idempotency - a streamed write repeated after its repository moved replays or is refused', async (t) => {
  const repo = await repoOffTheOrgShard('idem-stream');
  const headers = { 'idempotency-key': 'stream-1' };
  const body = { base_change_id: ROOT, ops: [{ op: 'write', path: 'a', content: 'a' }] };
  const first = await s.api('POST', `/acme/${repo.name}/apply-ops`, { body, headers });
  t.equal(first.status, 201);
  t.equal((await s.api('PATCH', `/acme/${repo.name}`, { body: { name: `${repo.name}-renamed` } })).status, 200);
  t.equal((await s.api('POST', `/acme/${repo.name}/apply-ops`, { body, headers })).text, first.text, 'the name is gone');
  t.equal((await s.api('POST', '/acme/repos', { body: { name: repo.name } })).status, 201);
  t.equal((await s.api('POST', `/acme/${repo.name}/apply-ops`, { body, headers })).text, first.text, 'the name has a new holder');
  const other = await s.api('POST', `/acme/${repo.name}/apply-ops`, { body: { ...body, ops: [{ op: 'write', path: 'a', content: 'b' }] }, headers });
  t.equal(other.status, 409);
  t.equal(other.json.error.code, 'ABORTED');
  t.equal(await changeCount(repo.name), 0, 'nothing applied to the new holder');
  t.equal(await changeCount(`${repo.name}-renamed`), 1, 'applied once');
});

t.test('idempotency - concurrent repeats of a repository write apply once', async (t) => {
  const repo = await repoOffTheOrgShard('idem-race');
  const token = await s.token();
  const body = { base_change_id: ROOT, ops: [{ op: 'write', path: 'a', content: 'a' }] };
  const results = await Promise.all(Array.from({ length: 12 }, () => s.api('POST', `/acme/${repo.name}/apply-ops`, { body, token, headers: { 'idempotency-key': 'race-1' } })));
  t.ok(results.every((r) => r.status === 201), results.map((r) => r.status).join(','));
  t.equal(new Set(results.map((r) => r.text)).size, 1, 'one body for all');
  t.equal(await changeCount(repo.name), 1, 'exactly one change');
});

t.test('idempotency - a record written before records moved into shards still replays', async (t) => {
  const before = await repoCount();
  const stored = '{"kept":"from before the upgrade"}';
  await withStorage((storage) =>
    // The shape and key the unsharded layout wrote.
    storage.meta.put(K.legacyIdempotency(s.key.id, 'legacy-1'), { fingerprint: requestFingerprint('POST', '/acme/repos', '{}'), status: 201, sealed_body: secrets.seal(stored), at: Date.now() }),
  );
  const repeat = await createWithKey('legacy-1', {});
  t.equal(repeat.status, 201);
  t.equal(repeat.text, stored);
  t.equal(await repoCount(), before, 'nothing applied again');
});

t.test('idempotency - a stored response is replayed only to a token of the same reach', async (t) => {
  // A token narrowed to some repositories may not be handed what a wider token of its key was
  // answered: here an org-wide webhook target and its secret, which it could not create itself.
  const target = { url: 'http://127.0.0.1:9/reach' };
  const orgWide = await s.api('POST', '/acme/webhook-targets', { body: target, headers: { 'idempotency-key': 'reach-target' } });
  t.equal(orgWide.status, 201, orgWide.text);
  t.ok(orgWide.json.secret, 'the response that created the target carries its secret');
  await s.api('POST', '/acme/repos', { body: { name: 'reach' } });
  const narrowed = (): Promise<string> => s.token({ scopes: ['admin'], repos: ['acme/reach'] });
  const replay = await s.api('POST', '/acme/webhook-targets', { body: target, token: await narrowed(), headers: { 'idempotency-key': 'reach-target' } });
  t.equal(replay.status, 409, replay.text);
  t.notOk(replay.text.includes(orgWide.json.secret), 'the secret is not replayed');

  // Tokens narrowed alike replay each other; a wider one is another request.
  const write = { base_change_id: ROOT, ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }] };
  const first = await s.api('POST', '/acme/reach/apply-ops', { body: write, token: await narrowed(), headers: { 'idempotency-key': 'reach-write' } });
  t.equal(first.status, 201, first.text);
  const alike = await s.api('POST', '/acme/reach/apply-ops', { body: write, token: await narrowed(), headers: { 'idempotency-key': 'reach-write' } });
  t.equal(alike.json.change?.id, first.json.change.id, 'a token narrowed alike replays');
  const wider = await s.api('POST', '/acme/reach/apply-ops', { body: write, headers: { 'idempotency-key': 'reach-write' } });
  t.equal(wider.status, 409, wider.text);
  t.equal(await changeCount('reach'), 1, 'the write applied once');
});
