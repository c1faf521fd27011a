import t from 'tap';
import { applyOps, createRepo, eventsOf, passwordAuth, startSyncEnv, waitForSync, type SyncEnv } from './fixtures.js';

let env: SyncEnv;
t.before(async () => {
  env = await startSyncEnv();
});
t.teardown(() => env.close());

t.test('crash - syncs interrupted by kill -9 resume after a restart: one record each, the remote updated once', async (t) => {
  const url = await env.git.createRepo('crash');
  const repo = await createRepo(env.s, 'crash', { url, auth: passwordAuth });
  const change = await applyOps(env.s, 'crash', { base_change_id: 'z'.repeat(32), message: 'one', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });

  // The first push stops at ref discovery; a second one waits behind it in the queue.
  const hold = env.git.hold((r) => r.method === 'GET' && r.service === 'git-receive-pack');
  const first = (await env.s.api('POST', '/acme/crash/push')).json;
  await hold.held;
  const second = (await env.s.api('POST', '/acme/crash/push')).json;
  t.equal((await env.s.api('GET', `/acme/crash/upstream/syncs/${first.id}`)).json.status, 'in_progress');
  t.equal((await env.s.api('GET', `/acme/crash/upstream/syncs/${second.id}`)).json.status, 'queued');

  await env.s.kill();
  hold.release();
  await env.s.restart();

  const done1 = await waitForSync(env.s, 'crash', first.id);
  const done2 = await waitForSync(env.s, 'crash', second.id);
  t.equal(done1.status, 'completed', done1.error ?? '');
  t.equal(done1.attempt, 2, 'the interrupted try was tried again');
  t.equal(done1.stats.refs[0].outcome, 'updated');
  t.equal(done2.status, 'completed', done2.error ?? '');
  t.equal(done2.attempt, 1);
  t.equal(done2.stats.refs[0].outcome, 'unchanged');
  t.ok(done2.started_at >= done1.finished_at, 'still one at a time, in order');

  const list = await env.s.api('GET', '/acme/crash/upstream/syncs');
  t.same(list.json.syncs.map((s: any) => s.id), [second.id, first.id], 'one record per sync');
  const pushes = env.git.requests.filter((r) => r.method === 'POST' && r.service === 'git-receive-pack' && r.status === 200);
  t.equal(pushes.length, 1, 'the remote was updated once');
  t.equal(await env.git.git('crash', ['rev-parse', 'refs/heads/main']), change.current_commit_oid);
  const ofFirst = (e: { type: string; data: any }): boolean => e.type.startsWith('sync.') && e.data.sync.id === first.id;
  const events = await eventsOf(env, repo.id, (all) => all.some((e) => ofFirst(e) && e.type === 'sync.completed'));
  const types = events.filter(ofFirst).map((e) => e.type);
  t.same(types, ['sync.queued', 'sync.in_progress', 'sync.queued', 'sync.in_progress', 'sync.completed']);
});

t.test('crash - a graceful stop during a try exits cleanly and the next start finishes the sync', async (t) => {
  const url = await env.git.createRepo('graceful');
  await createRepo(env.s, 'graceful', { url, auth: passwordAuth });
  const change = await applyOps(env.s, 'graceful', { base_change_id: 'z'.repeat(32), message: 'one', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });
  const hold = env.git.hold((r) => r.method === 'GET' && r.service === 'git-receive-pack');
  const queued = (await env.s.api('POST', '/acme/graceful/push')).json;
  await hold.held;
  // The try cannot finish while the remote holds it: the stop gives up on it after its grace.
  t.equal(await env.s.stop(), 0, 'SIGTERM exits 0');
  hold.release();
  await env.s.restart();
  const done = await waitForSync(env.s, 'graceful', queued.id);
  t.equal(done.status, 'completed', done.error ?? '');
  t.equal(done.attempt, 2);
  t.equal(await env.git.git('graceful', ['rev-parse', 'refs/heads/main']), change.current_commit_oid);
});
