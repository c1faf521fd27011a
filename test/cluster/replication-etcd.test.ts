import t from 'tap';
import { startCluster } from '../helpers/cluster.js';
import { killOwnerScenario } from '../helpers/replica-scenarios.js';

// Replication through the etcd shard log (docs/design.md, "Cluster mode"): 3 repohost processes,
// 3 etcd members. The same scenarios run on JetStream in replication-jetstream.test.ts.
const TTL_S = 10;
// The suite runs this scenario on the other log (replication-jetstream.test.ts, with a rejoin); both logs with REPOHOST_LONG_TESTS=1,
// to keep the default suite inside its time budget.
const skip = process.env.REPOHOST_LONG_TESTS === '1' ? false : 'the other log runs it by default: set REPOHOST_LONG_TESTS=1';

t.test('writes replicate to every node, and an owner killed under load fails over', { skip }, async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', leaseTtlS: TTL_S });
  await killOwnerScenario(t, cluster, TTL_S);
});
