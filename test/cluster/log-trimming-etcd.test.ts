import t from 'tap';
import { TRIM_ENV, logTrimScenario } from '../helpers/log-trim-scenario.js';
import { startReplicaCluster } from '../helpers/replica-nodes.js';

// Log trimming and state transfer on the etcd shard log (docs/design.md, "Cluster mode"): 3
// repohost processes, 3 etcd members. The same scenario runs on JetStream with
// REPOHOST_LONG_TESTS=1 (log-trimming-jetstream.test.ts).
t.test('owners trim their logs under load, and a wiped node is seeded from its peers', async (t) => {
  const cluster = await startReplicaCluster(t, { log: 'etcd', leaseTtlS: 10, env: TRIM_ENV });
  await logTrimScenario(t, cluster);
});
