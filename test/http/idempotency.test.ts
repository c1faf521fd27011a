import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { openStorage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';

/** Idempotency-Key (API §1): a repeat replays the first response and applies nothing again. */
const s = await serverForFile(t);

const createWithKey = (key: string, body: unknown, token?: string) => s.api('POST', '/acme/repos', { body, token, headers: { 'idempotency-key': key } });
const repoCount = async (): Promise<number> => (await s.api('GET', '/acme')).json.num_repos;

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
  const storage = openStorage(s.dataDir);
  try {
    const key = K.idempotency(s.key.id, 'expiring');
    const record = storage.meta.get(key) as { status: number; at: number; sealed_body: string };
    t.equal(record.status, 201);
    t.notOk('body' in record, 'the stored response is sealed, never kept in plain text');
    t.notOk(record.sealed_body.includes(first.json.id), 'the sealed body does not show the response');
    await storage.meta.put(key, { ...record, at: Date.now() - 24 * 3600 * 1000 - 1000 });
  } finally {
    await storage.close();
  }
  const fresh = await createWithKey('expiring', { name: 'after-expiry' });
  t.equal(fresh.status, 201, 'another body is accepted: the old record expired');
  t.equal(fresh.json.name, 'after-expiry');
});
