import t from 'tap';
import { TRIM_ENV, logTrimScenario } from '../helpers/log-trim-scenario.js';
import { startCluster } from '../helpers/cluster.js';

// Log trimming and state transfer on the etcd shard log (docs/design.md, "Cluster mode"): 3
// repohost processes, 3 etcd members; the same scenario on JetStream in
// log-trimming-jetstream.test.ts. Both with REPOHOST_LONG_TESTS=1 (70 s each): the default suite
// copies shards between nodes in shard-transfer.test.ts and keeps inside its time budget.
const skip = process.env.REPOHOST_LONG_TESTS === '1' ? false : 'set REPOHOST_LONG_TESTS=1';

t.test('owners trim their logs under load, and a wiped node is seeded from its peers', { skip }, async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', leaseTtlS: 10, env: TRIM_ENV });
  await logTrimScenario(t, cluster);
});
