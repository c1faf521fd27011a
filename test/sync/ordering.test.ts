import t from 'tap';
import { cleanupWork, createRepo, enqueue, makeUpstream, passwordAuth, startSyncEnv, waitForSync, type SyncEnv } from './fixtures.js';

/** The largest number of [started_at, finished_at) intervals that overlap at one instant. */
function maxOverlap(syncs: Array<{ started_at: string; finished_at: string }>): number {
  let max = 0;
  for (const s of syncs) {
    const at = s.started_at;
    max = Math.max(max, syncs.filter((o) => o.started_at <= at && at < o.finished_at).length);
  }
  return max;
}

t.test('ordering - 20 syncs of one repository run one at a time, in enqueue order', async (t) => {
  const env: SyncEnv = await startSyncEnv();
  const up = await makeUpstream(env.git, 'serial');
  t.teardown(async () => {
    cleanupWork(up);
    await env.close();
  });
  await createRepo(env.s, 'serial', { url: up.url, auth: passwordAuth });
  env.git.setDelay(10);
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) ids.push((await enqueue(env.s, 'serial', { direction: i % 2 ? 'push' : 'pull' })).id);
  const done = [];
  for (const id of ids) done.push(await waitForSync(env.s, 'serial', id));
  t.ok(done.every((s) => s.status === 'completed' && s.attempt === 1), 'all completed on the first try');
  for (let i = 1; i < done.length; i++) {
    t.ok(done[i].started_at >= done[i - 1].finished_at, `sync ${i} started after sync ${i - 1} finished`);
  }
  t.equal(maxOverlap(done), 1);
});

t.test('ordering - syncs of different repositories run concurrently, bounded by REPOHOST_SYNC_CONCURRENCY', async (t) => {
  const env: SyncEnv = await startSyncEnv({ env: { REPOHOST_SYNC_CONCURRENCY: '2' } });
  const up = await makeUpstream(env.git, 'shared');
  t.teardown(async () => {
    cleanupWork(up);
    await env.close();
  });
  for (let i = 0; i < 4; i++) await createRepo(env.s, `par-${i}`, { url: up.url, auth: passwordAuth });
  // Every git request takes 300 ms, so a pull lasts well over half a second.
  env.git.setDelay(300);
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push((await enqueue(env.s, `par-${i}`)).id);
  const done = [];
  for (let i = 0; i < 4; i++) done.push(await waitForSync(env.s, `par-${i}`, ids[i]));
  t.ok(done.every((s) => s.status === 'completed'), 'all completed');
  t.equal(maxOverlap(done), 2, 'two at a time: concurrent, and never more than the limit');
  const metrics = await (await fetch(env.s.metricsUrl!)).text();
  t.match(metrics, /\nrepohost_sync_queue_length 0\n/);
});
