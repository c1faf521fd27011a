import t from 'tap';
import { settledReaderLag } from '../helpers/metrics-text.js';
import { applyOps, cleanupWork, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv } from './fixtures.js';

/**
 * A worker that has finished its task must not keep reading an LMDB snapshot while idle: that
 * snapshot keeps every later write from reusing the pages it frees, and the data file grows with
 * each write for as long as the worker idles (the whole life of a server that synced once).
 */
const env = await startSyncEnv();
const up = await makeUpstream(env.git, 'upstream');
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});


t.test('the sync worker holds no snapshot once its pull is done', async (t) => {
  await createRepo(env.s, 'mirror', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'mirror');
  t.equal(sync.status, 'completed', sync.error ?? '');
  await createRepo(env.s, 'writes', null);
  const WRITES = 30;
  for (let i = 0; i < WRITES; i++) await applyOps(env.s, 'writes', { base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path: `f${i}.txt`, content: `${i}` }] });
  const seen = await settledReaderLag(env.s, WRITES / 3);
  t.ok(seen < WRITES / 3, `the oldest snapshot is younger than the ${WRITES} writes made after the pull (lag ${seen})`);
});
