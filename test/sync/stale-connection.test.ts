import t from 'tap';
import { cleanupWork, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv, upstreamCommit, type SyncEnv, type Upstream } from './fixtures.js';
import { startIdleResetFront, type IdleResetFront } from './fake-upstream.js';

// The upstream is reached through fronts that reset a connection used again after some silence,
// the way a load balancer that dropped an idle connection answers the next request.
const IDLE_MS = 1000;
// Retries wait 100, 300, 900 and 2,700 ms: with 1.6 s of patience only the last try meets a dead
// connection (the scheduler adds some milliseconds to each wait), while the client still keeps
// it (it drops kept connections after 4 s, from the server's keep-alive hint of 5 s).
const RETRY_BASE_MS = 100;
const LAST_TRY_IDLE_MS = 1600;

let env: SyncEnv;
let up: Upstream;
let front: IdleResetFront;
let lastTryFront: IdleResetFront;
t.before(async () => {
  env = await startSyncEnv({ env: { REPOHOST_SYNC_RETRY_BASE_MS: String(RETRY_BASE_MS) } });
  up = await makeUpstream(env.git, 'upstream');
  const port = Number(new URL(env.git.url).port);
  front = await startIdleResetFront(port, IDLE_MS);
  lastTryFront = await startIdleResetFront(port, LAST_TRY_IDLE_MS);
});
t.teardown(async () => {
  cleanupWork(up);
  await front.close();
  await lastTryFront.close();
  await env.close();
});

t.test('stale connections - the first sync after the upstream sat idle past its keep-alive completes on its first try', async (t) => {
  await createRepo(env.s, 'idle', { url: `${front.url}/upstream.git`, auth: passwordAuth });
  t.equal((await pullAndWait(env.s, 'idle')).status, 'completed');
  await upstreamCommit(env.git, up, 'main', 'later.txt', 'later\n');
  // Idle time is the condition under test: the kept connection must outlive the front's patience.
  await new Promise((r) => setTimeout(r, 2 * IDLE_MS));
  const resets = front.resets;
  const sync = await pullAndWait(env.s, 'idle');
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.equal(sync.attempt, 1, 'no try was spent on the dead connection');
  t.ok(front.resets > resets, 'the kept connection was dead and a new one served the request');
});

t.test('stale connections - an upstream answering 500 to every try fails naming HTTP 500', async (t) => {
  await createRepo(env.s, 'always500', { url: `${lastTryFront.url}/upstream.git`, auth: passwordAuth });
  env.git.failNext(1000, 500);
  t.teardown(() => env.git.failNext(0));
  const resets = lastTryFront.resets;
  const sync = await pullAndWait(env.s, 'always500');
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 5);
  t.equal(sync.error, 'the upstream is unavailable (HTTP 500 Internal Server Error) (gave up after 5 tries)');
  t.ok(lastTryFront.resets > resets, 'a try met a dead kept connection on the way');
});
