import t from 'tap';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { loadConfig } from '../../src/config.js';
import { startNats } from '../helpers/cluster-engines.js';
import { shardLogScenarios } from '../helpers/shard-log-scenarios.js';

// The shard log conformance scenarios on a real 3-server JetStream cluster with R3 streams,
// opened through the settings as a node does.
const nats = await startNats();
t.teardown(() => nats.stop());

shardLogScenarios(t, {
  engines: nats,
  open: async (only) => {
    const config = loadConfig({
      REPOHOST_CLUSTER_NAME: 'conf',
      // Cluster mode needs etcd endpoints; the JetStream log never calls them.
      REPOHOST_CLUSTER_ETCD: 'http://127.0.0.1:1',
      REPOHOST_CLUSTER_NATS: (only === undefined ? nats.endpoints : [nats.endpoints[only]!]).join(','),
      REPOHOST_NODE_ID: 'n1',
      REPOHOST_NODE_INTERNAL_URL: 'http://127.0.0.1:1',
      REPOHOST_SHARD_LOG: 'jetstream',
      REPOHOST_SHARD_LOG_REPLICAS: '3',
    });
    return openShardLog(config.cluster!);
  },
  leaderFor: async (shard) => {
    // The stream's Raft leader, asked of any live server.
    for (const endpoint of nats.endpoints) {
      const nc = await connect({ servers: endpoint, timeout: 1000 }).catch(() => null);
      if (!nc) continue;
      try {
        const info = await (await jetstreamManager(nc)).streams.info(`RH_CONF_WAL_${shard % 4}`);
        return nats.members.findIndex((m) => m.name === info.cluster?.leader);
      } finally {
        await nc.close();
      }
    }
    return -1;
  },
  // Measured 4.9 s without an ack in the design research (meta and stream re-election).
  maxOutageMs: 15_000,
});
