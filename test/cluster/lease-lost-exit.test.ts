import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { LEASE_LOST_EXIT } from '../../src/cluster/cluster-node.js';
import { startCluster } from '../helpers/cluster.js';
import { ROOT } from '../helpers/replica-scenarios.js';

// A node that finds its lease lost while a worker thread is inside a command's transaction still
// leaves, with its exit status. A file write here keeps its worker busy for STALL_MS inside its
// transaction (src/actors/fault-points.ts); the node is stopped (SIGSTOP) past its lease with a
// write in that state and continued. Before, process.exit() terminated the worker mid-transaction,
// lmdb-js's clean-up then waited forever on a lock the worker held, and the process never ended.
const TTL_S = 4;
// Wall time, which runs on while the process is stopped: longer than the pause.
const STALL_MS = 10_000;

t.test('a node that lost its lease leaves while a worker is inside a transaction', async (t) => {
  const cluster = await startCluster(t, {
    log: 'etcd',
    count: 1,
    leaseTtlS: TTL_S,
    env: { REPOHOST_STALL: 'in-transaction:apply-ops', REPOHOST_STALL_MS: String(STALL_MS) },
  });
  await cluster.settled();
  const [node] = cluster.nodes;
  const created = await node!.api('POST', '/acme/repos', { body: { name: 'stalled' } });
  t.equal(created.status, 201, 'repository created');

  const exit = new Promise<number | string | null>((resolve) => node!.process.once('exit', (code, signal) => resolve(code ?? signal)));
  const write = node!.api('POST', '/acme/stalled/apply-ops', { body: { base_change_id: ROOT, ops: [{ op: 'write', path: 'a.txt', content: 'a' }] } }).catch(() => undefined);
  // Once the write is inside its transaction (for STALL_MS), stop the process, past the lease.
  const deadline = Date.now() + STALL_MS;
  while (!node!.logs.some((line) => line.includes('"msg":"stalling"'))) {
    if (Date.now() > deadline) throw new Error('the write never reached its stall point');
    await sleep(20);
  }
  node!.pause();
  await sleep((TTL_S + 1) * 1000);
  node!.resume();

  const exited = await Promise.race([exit, sleep(20_000).then(() => 'still running after 20 s')]);
  t.equal(exited, LEASE_LOST_EXIT, 'the node left with the lease-lost status');
  await write;
});
