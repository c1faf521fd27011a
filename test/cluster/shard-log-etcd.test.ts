import t from 'tap';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { loadConfig } from '../../src/config.js';
import { startEtcd } from '../helpers/cluster-engines.js';
import { shardLogScenarios } from '../helpers/shard-log-scenarios.js';

// The shard log conformance scenarios on a real 3-member etcd cluster, opened through the
// settings as a node does.
const etcd = await startEtcd();
t.teardown(() => etcd.stop());

shardLogScenarios(t, {
  engines: etcd,
  open: async (only) => {
    const config = loadConfig({
      REPOHOST_CLUSTER_NAME: 'conf',
      REPOHOST_CLUSTER_ETCD: (only === undefined ? etcd.endpoints : [etcd.endpoints[only]!]).join(','),
      REPOHOST_NODE_ID: 'n1',
      REPOHOST_NODE_INTERNAL_URL: 'http://127.0.0.1:1',
      REPOHOST_SHARD_LOG: 'etcd',
    });
    return openShardLog(config.cluster!);
  },
  leaderFor: () => etcd.leader(),
  // A new Raft leader in about a second (election timeout 1 s), plus the client's deadlines.
  maxOutageMs: 8000,
});
