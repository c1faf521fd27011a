import t from 'tap';
import { EtcdShardLog } from '../../src/cluster/log/etcd-log.js';
import { startEtcd } from '../helpers/cluster-engines.js';
import { shardLogScenarios } from '../helpers/shard-log-scenarios.js';

// The shard log conformance scenarios on a real 3-member etcd cluster.
const etcd = await startEtcd();
t.teardown(() => etcd.stop());

shardLogScenarios(t, {
  engines: etcd,
  open: async (only) => new EtcdShardLog({ hosts: only === undefined ? etcd.endpoints : [etcd.endpoints[only]!], cluster: 'conf' }),
  leaderFor: () => etcd.leader(),
  // A new Raft leader in about a second (election timeout 1 s), plus the client's deadlines.
  maxOutageMs: 8000,
});
