import { startControlNode } from './control-nodes.js';

/**
 * One control-plane node in its own process, for tests that must stall a node's event loop
 * without stalling the test's. Settings come from the environment; it answers messages:
 * `{block: ms}` spins the event loop for that long, then replies with what the node says right
 * after (whether it may serve, its lease status). The test ends it with SIGKILL, a crash.
 *
 * Not a `serve` node: that one can only be stopped whole (SIGSTOP, as the replica-fence and
 * forwarding-refusals tests do), not have its event loop stuck while the process runs, and on
 * a lost lease it exits instead of saying what its membership reports.
 */
const env = process.env;
const node = await startControlNode({ cluster: env.RH_TEST_CLUSTER!, etcd: env.RH_TEST_ETCD!.split(','), ttlS: Number(env.RH_TEST_TTL_S) }, env.RH_TEST_NODE_ID!);
process.on('message', (msg: { block?: number }) => {
  if (msg.block === undefined) return;
  const until = Date.now() + msg.block;
  while (Date.now() < until) {
    // A stuck server: no timer, no I/O.
  }
  const mayServe = node.plane.membership.mayServe();
  process.send!({ mayServe, status: node.plane.membership.state().status });
});
process.send!({ ready: true });
