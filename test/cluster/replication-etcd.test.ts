import t from 'tap';
import { startReplicaCluster } from '../helpers/replica-nodes.js';
import { killOwnerScenario } from '../helpers/replica-scenarios.js';

// Replication through the etcd shard log (docs/design.md, "Cluster mode"): 3 repohost processes,
// 3 etcd members. The same scenarios run on JetStream in replication-jetstream.test.ts.
const TTL_S = 10;

t.test('writes replicate to every node, and an owner killed under load fails over', async (t) => {
  const cluster = await startReplicaCluster(t, { log: 'etcd', leaseTtlS: TTL_S });
  await killOwnerScenario(t, cluster, TTL_S);
});
