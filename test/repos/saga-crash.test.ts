import t, { type Test } from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { checkRepositories } from '../helpers/consistency.js';
import { openStorage } from '../../src/storage/database.js';
import { Ranges } from '../../src/storage/keys.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';

/**
 * Repository create, rename and delete are sagas across the org's shard and the repository's. The
 * server is killed (SIGKILL, by the test-only REPOHOST_FAULT hook) between two steps; what is on
 * disk is then whole, and after a restart the sweeper settles the saga: the repository exists
 * whole under one name, or not at all, and never a name without a repository.
 */
const ROOT = 'z'.repeat(32);
const SWEPT = { REPOHOST_SAGA_TIMEOUT_S: '1' };

// Each case has a server of its own and spends most of its time starting and stopping it.
t.jobs = 3;

/** Starts a server armed to die at `point`, with `prepare` done before the fatal request. */
async function armed(t: Test, point: string, prepare: (s: TestServer) => Promise<void>): Promise<TestServer> {
  const s = await startTestServer({ env: { ...SWEPT, REPOHOST_FAULT: point } });
  t.teardown(() => s.cleanup());
  await prepare(s);
  return s;
}

/** Sends the request the server dies in, and waits for the death. */
async function dies(t: Test, s: TestServer, method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<void> {
  const answered = await s.api(method, path, { body, headers }).then(
    (res) => res.status,
    () => null,
  );
  t.equal(answered, null, `${method} ${path} got no answer: the process died`);
  await s.kill();
}

async function unsettledSagas(dataDir: string): Promise<number> {
  const storage = openStorage(dataDir);
  try {
    const org = new LmdbOrgDirectory(storage).orgBySlug('acme')!;
    return storage.meta.getKeysCount(Ranges.orgSagas(org.id));
  } finally {
    await storage.close();
  }
}

/** Restarts without the fault and waits until the sweeper has settled every saga. */
async function restartAndSettle(t: Test, s: TestServer): Promise<void> {
  t.ok((await unsettledSagas(s.dataDir)) > 0, 'the saga is unfinished on disk');
  await checkRepositories(t, s.dataDir, 'acme');
  await s.restart(SWEPT);
  const deadline = Date.now() + 30_000;
  while ((await unsettledSagas(s.dataDir)) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  t.equal(await unsettledSagas(s.dataDir), 0, 'the sweeper settled the saga');
  await checkRepositories(t, s.dataDir, 'acme');
}

const listed = async (s: TestServer): Promise<string[]> => (await s.api('GET', '/acme/repos?limit=100')).json.repos.map((r: { name: string }) => r.name);

/** The repository answers by name, is listed once, and takes a write. */
async function whole(t: Test, s: TestServer, name: string): Promise<void> {
  const got = await s.api('GET', `/acme/${name}`);
  t.equal(got.status, 200, `${name} is found by name`);
  t.equal(got.json.name, name);
  t.same((await listed(s)).filter((n) => n === name), [name], `${name} is listed once`);
  t.equal((await s.api('POST', `/acme/${name}/bookmarks`, { body: { name: `after-${Date.now()}`, change_id: ROOT } })).status, 201, `${name} takes a write`);
  t.equal((await s.api('POST', '/acme/repos', { body: { name } })).status, 409, `the name ${name} is taken`);
}

/** Nothing answers to the name, nothing is listed under it, and the name is free again. */
async function absent(t: Test, s: TestServer, name: string): Promise<void> {
  t.equal((await s.api('GET', `/acme/${name}`)).status, 404, `${name} is not found`);
  t.notOk((await listed(s)).includes(name), `${name} is not listed`);
  const again = await s.api('POST', '/acme/repos', { body: { name } });
  t.equal(again.status, 201, `the name ${name} is free`);
  t.same((await s.api('GET', `/acme/${name}/bookmarks`)).json.bookmarks.map((b: { name: string }) => b.name), ['main'], 'a fresh repository, nothing of an older one');
}

t.test('create - killed after the reservation: the name is released', async (t) => {
  const s = await armed(t, 'repo.create:after-reserve', async () => undefined);
  await dies(t, s, 'POST', '/acme/repos', { name: 'half' });
  await restartAndSettle(t, s);
  await absent(t, s, 'half');
  t.match(s.logs.join(''), /settled a stale repository saga.*"outcome":"undone"/);
});

t.test('create - killed after the repository is initialised: the create is confirmed', async (t) => {
  const s = await armed(t, 'repo.create:after-init', async () => undefined);
  await dies(t, s, 'POST', '/acme/repos', { name: 'Nearly' });
  await restartAndSettle(t, s);
  await whole(t, s, 'Nearly');
  t.match(s.logs.join(''), /settled a stale repository saga.*"outcome":"finished"/);
});

/**
 * The client never had an answer, so it repeats the request with its Idempotency-Key: the repeat
 * finds the saga unfinished and finishes it, answering 201 with the repository the first attempt
 * made, and a repeat with another body is refused. (The sweeper settling it first, and the other
 * ways a create is cut short, are in test/actors/repo-create-retry.test.ts.)
 */
t.test('create with an Idempotency-Key - killed after the repository is initialised: the repeat finishes it', async (t) => {
  const key = { 'idempotency-key': 'create-kept' };
  const s = await armed(t, 'repo.create:after-init', async () => undefined);
  await dies(t, s, 'POST', '/acme/repos', { name: 'Kept' }, key);
  t.ok((await unsettledSagas(s.dataDir)) > 0, 'the saga is unfinished on disk');
  // The sweeper leaves it alone: the repeat alone finishes it.
  await s.restart({ REPOHOST_SAGA_TIMEOUT_S: '3600' });
  const retry = await s.api('POST', '/acme/repos', { body: { name: 'Kept' }, headers: key });
  t.equal(retry.status, 201, `the repeat is answered 201: ${retry.text}`);
  t.equal((await s.api('GET', '/acme/Kept')).json.id, retry.json.id, 'with the repository the name finds');
  const again = await s.api('POST', '/acme/repos', { body: { name: 'Kept' }, headers: key });
  t.equal(again.text, retry.text, 'a further repeat replays it byte for byte');
  const other = await s.api('POST', '/acme/repos', { body: { name: 'Other' }, headers: key });
  t.equal(other.status, 409);
  t.equal(other.json.error.code, 'ABORTED', 'the key with another body is refused');
  t.equal(await unsettledSagas(s.dataDir), 0, 'the repeat finished the saga');
  await whole(t, s, 'Kept');
  await absent(t, s, 'Other');
});

for (const point of ['repo.delete:after-retire', 'repo.delete:after-delete']) {
  t.test(`delete - killed at ${point}: the delete is finished`, async (t) => {
    const s = await armed(t, point, async (s) => {
      t.equal((await s.api('POST', '/acme/repos', { body: { name: 'doomed' } })).status, 201);
      t.equal((await s.api('POST', '/acme/doomed/bookmarks', { body: { name: 'old-work', change_id: ROOT } })).status, 201);
    });
    await dies(t, s, 'DELETE', '/acme/doomed');
    await restartAndSettle(t, s);
    await absent(t, s, 'doomed');
  });
}

t.test('rename - killed after the new name is held: the rename is undone', async (t) => {
  const s = await armed(t, 'repo.rename:after-reserve', async (s) => {
    t.equal((await s.api('POST', '/acme/repos', { body: { name: 'before' } })).status, 201);
  });
  await dies(t, s, 'PATCH', '/acme/before', { name: 'after', tags: { moved: 'yes' } });
  await restartAndSettle(t, s);
  await whole(t, s, 'before');
  t.same((await s.api('GET', '/acme/before')).json.tags, {}, 'no field of the lost request applied');
  await absent(t, s, 'after');
});

t.test('rename - killed after the record is renamed: the rename is finished', async (t) => {
  const s = await armed(t, 'repo.rename:after-update', async (s) => {
    t.equal((await s.api('POST', '/acme/repos', { body: { name: 'first' } })).status, 201);
  });
  await dies(t, s, 'PATCH', '/acme/first', { name: 'second', tags: { moved: 'yes' } });
  await restartAndSettle(t, s);
  await whole(t, s, 'second');
  t.same((await s.api('GET', '/acme/second')).json.tags, { moved: 'yes' }, 'the whole request applied');
  await absent(t, s, 'first');
});
