import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { JetStreamShardLog } from '../../src/cluster/log/jetstream-log.js';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { loadConfig } from '../../src/config.js';
import type { ShardLog, ShardLogEntry } from '../../src/cluster/shard-log.js';
import { startNats } from '../helpers/cluster-engines.js';
import { appendSettled, shardLogScenarios } from '../helpers/shard-log-scenarios.js';

// The shard log conformance scenarios on a real 3-server JetStream cluster with R3 streams,
// opened through the settings as a node does.
const nats = await startNats();
t.teardown(() => nats.stop());

const open = async (only?: number): Promise<ShardLog> => {
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
};

shardLogScenarios(t, {
  engines: nats,
  open,
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

/**
 * A node follows most shards and most of them are idle: their tails' progress checks (every 3 s)
 * must not each ask the shard's leader for its last entry. Twelve tails, eight caught up and four
 * on empty shards, over three checks: each asks once at most, and one whose shard grows still
 * delivers.
 */
/** The engine itself, without the pieces layer openShardLog adds: its own calls can be watched. */
const openEngine = (cluster = 'conf', unavailableBudgetMs?: number): Promise<JetStreamShardLog> =>
  JetStreamShardLog.open({ servers: nats.endpoints, cluster, replicas: 3, unavailableBudgetMs });

t.test('idle tails ask the leader for their last entry once, not at every progress check', async (t) => {
  const log = await openEngine();
  const writer = await open();
  t.teardown(async () => {
    await log.close();
    await writer.close();
  });
  const shards = Array.from({ length: 12 }, (_, i) => 200 + i);
  const positions = new Map<number, number>();
  for (const shard of shards.slice(0, 8)) positions.set(shard, await writer.append(shard, await writer.last(shard), `idle-${shard}`, new Uint8Array([1])));
  let asked = 0;
  const last = log.last.bind(log);
  log.last = (shard: number) => {
    asked++;
    return last(shard);
  };
  const seen: ShardLogEntry[] = [];
  const tails = shards.map((shard) =>
    log.tail(shard, positions.get(shard) ?? 0, async (entries) => {
      seen.push(...entries);
    }),
  );
  await sleep(3 * 3000 + 1500);
  t.ok(asked <= shards.length, `${asked} questions for ${shards.length} idle tails over three checks`);
  const grown = shards[0]!;
  await writer.append(grown, positions.get(grown)!, `grown-${grown}`, new Uint8Array([2]));
  const deadline = Date.now() + 5000;
  while (seen.length === 0 && Date.now() < deadline) await sleep(20);
  t.same(seen.map((e) => e.id), [`grown-${grown}`], 'a new entry still arrives');
  for (const tail of tails) await tail.stop();
});

/**
 * A tail outlives an outage longer than the log's retry budget: every server down for 10 s, with
 * a budget of 300 ms (and each request's 2 s deadline: a request made while the client is
 * disconnected waits for the reconnection that long). Its consumer goes silent, and a new one cannot be made until the servers
 * are back; the tail keeps trying instead of ending with `ShardLogUnavailable`.
 */
t.test('a tail outlives an outage longer than the retry budget', async (t) => {
  const log = await openEngine('outage', 300);
  const writer = await openEngine('outage');
  t.teardown(async () => {
    await log.close();
    await writer.close();
  });
  const shard = 21;
  const seen: string[] = [];
  let ended: unknown = null;
  const tail = log.tail(shard, 0, async (entries) => void seen.push(...entries.map((e) => e.id)));
  tail.done.catch((err: unknown) => (ended = err));
  const until = async (done: () => boolean, ms: number): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!done() && Date.now() < deadline) await sleep(50);
  };
  const first = await appendSettled(writer, shard, 0, 'before', new Uint8Array([1]));
  await until(() => seen.length === 1, 10_000);
  for (let i = 0; i < 3; i++) await nats.kill(i);
  await sleep(10_000);
  // Together: a server is ready only once it has routes to the others.
  await Promise.all([0, 1, 2].map((i) => nats.restart(i)));
  await appendSettled(writer, shard, first, 'after', new Uint8Array([2]));
  await until(() => seen.length === 2 || ended !== null, 30_000);
  t.equal(ended, null, 'the tail did not end');
  t.same(seen, ['before', 'after'], 'and delivered the entry appended after the outage');
  await tail.stop();
});
