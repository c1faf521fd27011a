import t from 'tap';
import { EtcdShardLog } from '../../src/cluster/log/etcd-log.js';
import { decodeLogRecord, encodeLogRecord } from '../../src/cluster/replica/log-record.js';
import { AppendFailed, MAX_MERGED_BYTES, ShardAppender } from '../../src/cluster/replica/shard-appender.js';
import { startEtcd } from '../helpers/cluster-engines.js';

// The owner's appends for one shard (src/cluster/replica/shard-appender.ts) against a real log:
// group commit while a record is in flight, and the fence when another owner wrote first.

const etcd = await startEtcd({ members: 1 });
t.teardown(() => etcd.stop());
const log = new EtcdShardLog({ hosts: etcd.endpoints, cluster: 'appender' });
t.teardown(() => log.close());

async function owner(shard: number): Promise<{ appender: ShardAppender; acks: number[] }> {
  const last = await log.append(shard, await log.last(shard), `epoch-${shard}`, encodeLogRecord({ epoch: 1, writeSets: [] }));
  const acks: number[] = [];
  const appender = new ShardAppender({ log, shard, epoch: 1, idPrefix: `n1:${shard}:1:${last}`, lastSeq: last, unknownDeadlineMs: 5000, onAck: (_seq, tag) => acks.push(tag) });
  return { appender, acks };
}

t.test('write sets submitted while a record is in flight share the next record, in order', async (t) => {
  const { appender, acks } = await owner(1);
  const sets = Array.from({ length: 40 }, (_, i) => new TextEncoder().encode(`set ${i}`));
  await Promise.all(sets.map((ws, i) => appender.submit(ws, i + 1)));
  const entries = await log.read(1, 0, 1000);
  const records = entries.map((e) => decodeLogRecord(e.record)).filter((r) => r.writeSets.length > 0);
  t.ok(records.length < sets.length, `${sets.length} write sets in ${records.length} records`);
  t.same(
    records.flatMap((r) => r.writeSets.map((ws) => new TextDecoder().decode(ws))),
    sets.map((_, i) => `set ${i}`),
    'every set once, in submission order',
  );
  t.equal(acks[acks.length - 1], sets.length, 'the last acknowledgement covers the last commit number');
  t.equal(appender.lastSeq, entries[entries.length - 1]!.seq, 'the appender knows the last sequence');
});

t.test('staged chunks submitted together are split into records the log takes', async (t) => {
  const { appender, acks } = await owner(3);
  // Five 1 MiB chunks, as a large upload stages them: merged, they are far above etcd's 1.5 MiB.
  const sets = Array.from({ length: 5 }, (_, i) => new Uint8Array(1024 * 1024 + 100).fill(i));
  await Promise.all(sets.map((ws, i) => appender.submit(ws, i + 1)));
  const records = (await log.read(3, 0, 100)).map((e) => decodeLogRecord(e.record)).filter((r) => r.writeSets.length > 0);
  t.ok(records.every((r) => r.writeSets.reduce((n, ws) => n + ws.length, 0) <= MAX_MERGED_BYTES), `${records.length} records, each within the merge limit`);
  t.same(
    records.flatMap((r) => r.writeSets.map((ws) => ws[0])),
    [0, 1, 2, 3, 4],
    'every chunk once, in order',
  );
  t.equal(acks[acks.length - 1], sets.length, 'the last acknowledgement covers the last commit number');
});

t.test('an append after another owner wrote is refused, and so is everything after it', async (t) => {
  const { appender } = await owner(2);
  await appender.submit(new Uint8Array([1]), 1);
  // A new owner fences the shard: its epoch record follows the last sequence it read.
  await log.append(2, appender.lastSeq, 'n2:2:2:epoch', encodeLogRecord({ epoch: 2, writeSets: [] }));
  const refused = await appender.submit(new Uint8Array([2]), 2).catch((err: unknown) => err);
  t.ok(refused instanceof AppendFailed && refused.reason === 'fenced', 'the stale append is refused as fenced');
  const later = await appender.submit(new Uint8Array([3]), 3).catch((err: unknown) => err);
  t.ok(later instanceof AppendFailed, 'a later one fails without being sent');
  const tail = (await log.read(2, 0, 100)).map((e) => decodeLogRecord(e.record));
  t.same(
    tail.map((r) => r.epoch),
    [1, 1, 2],
    'the log holds the first owner’s epoch record and write, then the new owner’s epoch record, nothing after',
  );
});
