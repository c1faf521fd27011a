import t from 'tap';
import { startCluster } from '../helpers/cluster.js';
import { killOwnerScenario, webhookBacklogScenario } from '../helpers/replica-scenarios.js';

// Replication through the JetStream shard log (docs/design.md, "Cluster mode"): 3 repohost processes,
// 3 etcd members and 3 nats-servers. The same scenarios run on etcd in replication-etcd.test.ts.
const TTL_S = 10;

t.test('writes replicate to every node, each pending delivery counts once, an owner killed under load fails over and rejoins', async (t) => {
  const cluster = await startCluster(t, { log: 'jetstream', leaseTtlS: TTL_S });
  await webhookBacklogScenario(t, cluster);
  await killOwnerScenario(t, cluster, TTL_S, { rejoin: true });
});
