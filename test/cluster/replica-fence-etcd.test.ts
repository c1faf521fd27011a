import t from 'tap';
import { startCluster } from '../helpers/cluster.js';
import { pauseOwnerScenario } from '../helpers/replica-scenarios.js';

// A stale owner (stopped past its lease, then continued) is fenced by the etcd shard log's
// conditional append, and nothing it acknowledged is lost (docs/design.md, "Cluster mode").
const TTL_S = 10;

t.test('an owner stopped past its lease is fenced and loses nothing it acknowledged', async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', leaseTtlS: TTL_S });
  await pauseOwnerScenario(t, cluster, TTL_S);
});
