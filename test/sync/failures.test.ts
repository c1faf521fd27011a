import t from 'tap';
import { GIT_PASSWORD, GIT_USER, cleanupWork, createRepo, enqueue, eventsOf, makeUpstream, passwordAuth, startSyncEnv, waitForSync, type SyncEnv, type Upstream } from './fixtures.js';

// Retries wait base × 1, 3, 9, 27: 500 ms leaves 1.5 s after the second failure for the test to
// bring the remote back before the third try; "down for good" has its own server with 100 ms.
const BASE_MS = 500;
const DEAD_BASE_MS = 100;
let env: SyncEnv;
let up: Upstream;
t.before(async () => {
  env = await startSyncEnv({ env: { REPOHOST_SYNC_RETRY_BASE_MS: String(BASE_MS) } });
  up = await makeUpstream(env.git, 'upstream');
});
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});

async function waitFor(repo: string, id: string, pred: (sync: any) => boolean, timeoutMs = 20000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await env.s.api('GET', `/acme/${repo}/upstream/syncs/${id}`);
    if (pred(res.json)) return res.json;
    if (Date.now() > deadline) throw new Error(`sync ${id} never matched: ${res.text}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The sync events of one sync, in order, and every breach of the per-status null rules (API §11.2). */
async function syncEvents(on: SyncEnv, repoId: string, syncId: string): Promise<{ types: string[]; breaches: string[] }> {
  const ofSync = (e: { type: string; data: any }): boolean => e.type.startsWith('sync.') && e.data.sync.id === syncId;
  const finished = (e: { type: string }): boolean => e.type === 'sync.completed' || e.type === 'sync.failed';
  const events = (await eventsOf(on, repoId, (all) => all.some((e) => ofSync(e) && finished(e)))).filter(ofSync);
  const breaches: string[] = [];
  events.forEach(({ type, data }, i) => {
    const s = data.sync;
    const ok =
      type === 'sync.queued' ? s.stats === null && s.error === null && s.started_at === null && s.finished_at === null
      : type === 'sync.in_progress' ? s.started_at !== null && s.finished_at === null && s.stats === null
      : type === 'sync.completed' ? s.stats !== null && s.finished_at !== null && s.error === null
      : s.error !== null && s.finished_at !== null;
    if (!ok) breaches.push(`${i}: ${type} ${JSON.stringify(s)}`);
  });
  return { types: events.map((e) => e.type), breaches };
}

t.test('failures - a wrong password fails at once, and the error does not carry the password', async (t) => {
  const wrong = 'Wrong-Pa55word-0987';
  const repo = await createRepo(env.s, 'wrongpw', { url: up.url, auth: { kind: 'username_password', username: GIT_USER, password: wrong } });
  const sync = await waitForSync(env.s, 'wrongpw', (await enqueue(env.s, 'wrongpw')).id);
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 1, 'no retry for a permanent failure');
  t.match(sync.error, /401/);
  t.notMatch(sync.error, wrong);
  t.equal(sync.stats, null);
  const events = await syncEvents(env, repo.id, sync.id);
  t.same(events.types, ['sync.queued', 'sync.in_progress', 'sync.failed']);
  t.same(events.breaches, []);
  const listed = await env.s.api('GET', '/acme/repos/list');
  t.equal(listed.json.repos.find((r: any) => r.name === 'wrongpw').upstream.status, 'error');
});

t.test('failures - a repository missing upstream fails at once as not found', async (t) => {
  await createRepo(env.s, 'missing', { url: `${env.git.url}/nope.git`, auth: passwordAuth });
  const sync = await waitForSync(env.s, 'missing', (await enqueue(env.s, 'missing')).id);
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 1);
  t.match(sync.error, /not found/);
});

t.test('failures - remote down for two tries and back before the third completes with attempt 3', async (t) => {
  const repo = await createRepo(env.s, 'flaky', { url: up.url, auth: passwordAuth });
  await env.git.down();
  const queued = await enqueue(env.s, 'flaky');
  // After the second failed try the sync waits 3 × base; the remote comes back meanwhile.
  await waitFor('flaky', queued.id, (s) => s.status === 'queued' && s.attempt === 2);
  await env.git.up();
  const sync = await waitForSync(env.s, 'flaky', queued.id);
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.equal(sync.attempt, 3);
  t.equal(sync.error, null);
  const events = await syncEvents(env, repo.id, sync.id);
  t.same(events.breaches, []);
  t.same(events.types, [
    'sync.queued',
    'sync.in_progress',
    'sync.queued',
    'sync.in_progress',
    'sync.queued',
    'sync.in_progress',
    'sync.completed',
  ]);
});

t.test('failures - remote answering 5xx is retried like a network failure', async (t) => {
  await createRepo(env.s, 'fivexx', { url: up.url, auth: passwordAuth });
  env.git.failNext(2, 503);
  const sync = await waitForSync(env.s, 'fivexx', (await enqueue(env.s, 'fivexx')).id);
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.equal(sync.attempt, 3);
});

t.test('failures - remote down for good fails after the 5th try, with backoff between tries', async (t) => {
  const dead = await startSyncEnv({ env: { REPOHOST_SYNC_RETRY_BASE_MS: String(DEAD_BASE_MS) } });
  t.teardown(() => dead.close());
  const url = await dead.git.createRepo('dead');
  const repo = await createRepo(dead.s, 'dead', { url, auth: passwordAuth });
  await dead.git.down();
  const started = Date.now();
  const sync = await waitForSync(dead.s, 'dead', (await enqueue(dead.s, 'dead')).id, ['failed', 'completed'], 30000);
  const elapsed = Date.now() - started;
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 5);
  t.match(sync.error, /ECONNREFUSED/);
  t.match(sync.error, /gave up after 5 tries/);
  t.ok(elapsed >= DEAD_BASE_MS * (1 + 3 + 9 + 27), `waited the backoff (${elapsed} ms)`);
  const { types, breaches } = await syncEvents(dead, repo.id, sync.id);
  t.same(breaches, []);
  t.equal(types.filter((e) => e === 'sync.in_progress').length, 5);
  t.equal(types.filter((e) => e === 'sync.queued').length, 5);
  t.equal(types[types.length - 1], 'sync.failed');
});

t.test('failures - credentials are checked per request: the right password works afterwards', async (t) => {
  await createRepo(env.s, 'fixed', { url: up.url, auth: { kind: 'username_password', username: GIT_USER, password: 'nope-nope-1' } });
  t.equal((await waitForSync(env.s, 'fixed', (await enqueue(env.s, 'fixed')).id)).status, 'failed');
  const patched = await env.s.api('PATCH', '/acme/fixed', { body: { upstream: { url: up.url, auth: { kind: 'username_password', username: GIT_USER, password: GIT_PASSWORD } } } });
  t.equal(patched.status, 200);
  t.equal((await waitForSync(env.s, 'fixed', (await enqueue(env.s, 'fixed')).id)).status, 'completed');
});
