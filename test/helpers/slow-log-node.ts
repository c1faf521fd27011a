import type { Test } from 'tap';
import { startCluster, type TestCluster, type TestNode } from './cluster.js';
import { startDelayProxy, type DelayProxy } from './delay-proxy.js';

/**
 * A one-node JetStream cluster whose log connection goes through a delay proxy: a write commits
 * locally at once and its append takes as long as the proxy holds it (`proxy.setDelay`), which
 * leaves a window in which the node holds a write its log has not acknowledged.
 */
export async function startSlowLogNode(t: Test): Promise<{ cluster: TestCluster; node: TestNode; proxy: DelayProxy }> {
  let proxy!: DelayProxy;
  const cluster = await startCluster(t, {
    log: 'jetstream',
    count: 1,
    natsVia: async (nats) => {
      const member = new URL(nats.endpoints[0]!);
      proxy = await startDelayProxy({ targetHost: member.hostname, targetPort: Number(member.port) });
      t.teardown(() => proxy.stop());
      return [`nats://${proxy.address}`];
    },
  });
  await cluster.settled();
  return { cluster, node: cluster.nodes[0]!, proxy };
}
