import t from 'tap';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { JetStreamShardLog } from '../../src/cluster/log/jetstream-log.js';
import { startNats } from '../helpers/cluster-engines.js';
import { shardLogScenarios } from '../helpers/shard-log-scenarios.js';

// The shard log conformance scenarios on a real 3-server JetStream cluster with R3 streams.
const nats = await startNats();
t.teardown(() => nats.stop());
const cluster = 'conf';

shardLogScenarios(t, {
  engines: nats,
  open: (only) => JetStreamShardLog.open({ servers: only === undefined ? nats.endpoints : [nats.endpoints[only]!], cluster, replicas: 3 }),
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
