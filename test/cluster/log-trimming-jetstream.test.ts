import t from 'tap';
import { TRIM_ENV, logTrimScenario } from '../helpers/log-trim-scenario.js';
import { startCluster } from '../helpers/cluster.js';

// The scenario of log-trimming-etcd.test.ts on JetStream, with REPOHOST_LONG_TESTS=1 as that one.
const skip = process.env.REPOHOST_LONG_TESTS === '1' ? false : 'set REPOHOST_LONG_TESTS=1';

t.test('owners trim their logs under load, and a wiped node is seeded from its peers', { skip }, async (t) => {
  const cluster = await startCluster(t, { log: 'jetstream', leaseTtlS: 10, env: TRIM_ENV });
  await logTrimScenario(t, cluster);
});
