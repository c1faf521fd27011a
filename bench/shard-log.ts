/**
 * Append latency and throughput of the two shard log backends on real 3-member engines started on
 * this machine, and the cost of reading a backlog in batches versus entry by entry.
 *
 *   node dist/bench/shard-log.js [--seconds 3] [--backends jetstream,etcd]
 *
 * Each append phase runs `inFlight` closed loops for `seconds`, each loop on its own shard (a shard
 * takes one append at a time: its next expected sequence is the previous ack). Then sequential
 * `last` calls (one leader round trip) and a backlog of 1,000 entries of 1 KiB read in batches of
 * 256 and entry by entry. One JSON line per phase; latencies in ms.
 */
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { EtcdShardLog } from '../src/cluster/log/etcd-log.js';
import { JetStreamShardLog } from '../src/cluster/log/jetstream-log.js';
import type { ShardLog } from '../src/cluster/shard-log.js';
import { startEtcd, startNats, type EngineCluster } from '../test/helpers/cluster-engines.js';
import { createHistogram, summarize } from './histogram.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    backends: { type: 'string', default: 'jetstream,etcd' },
  },
});
const seconds = Number(values.seconds);

interface Backend {
  name: string;
  start(): Promise<{ engines: EngineCluster; open: () => Promise<ShardLog> }>;
}

const backends: Backend[] = [
  {
    name: 'jetstream',
    start: async () => {
      const engines = await startNats();
      return { engines, open: () => JetStreamShardLog.open({ servers: engines.endpoints, cluster: 'bench', replicas: 3 }) };
    },
  },
  {
    name: 'etcd',
    start: async () => {
      const engines = await startEtcd();
      return { engines, open: async () => new EtcdShardLog({ hosts: engines.endpoints, cluster: 'bench' }) };
    },
  },
];

let nextShard = 0;

async function appendPhase(log: ShardLog, size: number, inFlight: number): Promise<Record<string, number>> {
  const record = randomBytes(size);
  const hist = createHistogram();
  const end = Date.now() + seconds * 1000;
  let count = 0;
  const loops = Array.from({ length: inFlight }, async () => {
    const shard = nextShard++;
    let last = 0;
    for (let i = 0; Date.now() < end; i++) {
      const t0 = process.hrtime.bigint();
      last = await log.append(shard, last, `b-${shard}-${i}`, record);
      hist.recordValue(Math.max(1, Number((process.hrtime.bigint() - t0) / 1000n)));
      count++;
    }
  });
  const t0 = Date.now();
  await Promise.all(loops);
  const s = summarize(hist);
  return { perSecond: Math.round(count / ((Date.now() - t0) / 1000)), p50: s.p50, p90: s.p90, p99: s.p99, max: s.max };
}

/** Sequential `last` calls: one leader round trip, what a JetStream append adds to check that it won. */
async function lastPhase(log: ShardLog): Promise<Record<string, number>> {
  const shard = nextShard++;
  await log.append(shard, 0, 'l-0', randomBytes(1024));
  const hist = createHistogram();
  const end = Date.now() + (seconds * 1000) / 2;
  while (Date.now() < end) {
    const t0 = process.hrtime.bigint();
    await log.last(shard);
    hist.recordValue(Math.max(1, Number((process.hrtime.bigint() - t0) / 1000n)));
  }
  const s = summarize(hist);
  return { p50: s.p50, p90: s.p90, p99: s.p99 };
}

async function readPhase(log: ShardLog, entries: number): Promise<Record<string, number>> {
  const shard = nextShard++;
  const record = randomBytes(1024);
  let last = 0;
  for (let i = 0; i < entries; i++) last = await log.append(shard, last, `r-${i}`, record);
  let t0 = Date.now();
  let after = 0;
  let read = 0;
  for (;;) {
    const batch = await log.read(shard, after, 256);
    read += batch.length;
    if (batch.length < 256) break;
    after = batch.at(-1)!.seq;
  }
  const batched = Date.now() - t0;
  if (read !== entries) throw new Error(`batched read found ${read} of ${entries}`);
  t0 = Date.now();
  after = 0;
  for (;;) {
    const [entry] = await log.read(shard, after, 1);
    if (!entry) break;
    after = entry.seq;
  }
  const oneByOne = Date.now() - t0;
  return { entries, batchedMs: batched, oneByOneMs: oneByOne };
}

for (const backend of backends.filter((b) => values.backends.split(',').includes(b.name))) {
  const { engines, open } = await backend.start();
  try {
    const log = await open();
    try {
      for (const size of [1024, 64 * 1024]) {
        for (const inFlight of [1, 16]) {
          const r = await appendPhase(log, size, inFlight);
          console.log(JSON.stringify({ backend: backend.name, phase: 'append', size, inFlight, ...r }));
        }
      }
      console.log(JSON.stringify({ backend: backend.name, phase: 'last', ...(await lastPhase(log)) }));
      console.log(JSON.stringify({ backend: backend.name, phase: 'read', ...(await readPhase(log, 1000)) }));
    } finally {
      await log.close();
    }
  } finally {
    await engines.stop();
  }
}
