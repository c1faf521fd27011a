import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';
import {
  ShardLogFenced,
  ShardLogTrimmed,
  ShardLogUnavailable,
  ShardLogUnknownOutcome,
  type ShardLog,
  type ShardLogEntry,
} from '../../src/cluster/shard-log.js';
import type { EngineCluster } from './cluster-engines.js';

/**
 * The conformance scenarios every shard log backend passes, on real 3-member engines. A backend's
 * test file starts its engines and hands over how to open a log and find the member whose death
 * interrupts a shard's appends.
 */
export interface ShardLogBackendUnderTest {
  engines: EngineCluster;
  /** A new client of the log; `only` restricts it to one member's endpoint. */
  open(only?: number): Promise<ShardLog>;
  /** The index of the member that leads appends to `shard` (stream leader, Raft leader). */
  leaderFor(shard: number): Promise<number>;
  /** The longest the kill test may go without an acknowledged append. */
  maxOutageMs: number;
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

/** Every entry after `after`, read in batches of `batch`. */
export async function readAll(log: ShardLog, shard: number, after = 0, batch = 64): Promise<ShardLogEntry[]> {
  const out: ShardLogEntry[] = [];
  for (;;) {
    const entries = await log.read(shard, after, batch);
    out.push(...entries);
    if (entries.length < batch) return out;
    after = entries.at(-1)!.seq;
  }
}

/**
 * `readAll`, asked again while the log is unavailable (up to 15 s): right after a member's loss
 * a read may outlast the log's own retry budget on a loaded machine (seen in the full suite).
 */
async function readAllSettled(log: ShardLog, shard: number, after: number): Promise<ShardLogEntry[]> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await readAll(log, shard, after, 256);
    } catch (err) {
      if (!(err instanceof ShardLogUnavailable) || Date.now() > deadline) throw err;
    }
  }
}

/**
 * An append that settles its unknown outcomes the way an owner does: it appends the same id
 * again (a copy that landed resolves to its sequence), and waits out unavailability.
 */
export async function appendSettled(log: ShardLog, shard: number, expectedLast: number, id: string, record: Uint8Array): Promise<number> {
  for (;;) {
    try {
      return await log.append(shard, expectedLast, id, record);
    } catch (err) {
      if (!(err instanceof ShardLogUnknownOutcome || err instanceof ShardLogUnavailable)) throw err;
      await sleep(50);
    }
  }
}

export function shardLogScenarios(t: Test, backend: ShardLogBackendUnderTest): void {
  t.test('append, read and last', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    t.equal(await log.last(1), 0, 'an empty shard is at 0');
    t.same(await log.read(1, 0, 10), [], 'and has no entries');
    const s1 = await log.append(1, 0, 'a-1', bytes('one'));
    // Shards 1 and 5 share a JetStream stream: their sequences interleave.
    const t1 = await log.append(5, 0, 'b-1', bytes('other'));
    const s2 = await log.append(1, s1, 'a-2', bytes('two'));
    const s3 = await log.append(1, s2, 'a-3', bytes('three'));
    t.ok(s1 > 0 && s2 > s1 && s3 > s2, `sequences increase: ${s1} ${s2} ${s3}`);
    t.equal(await log.last(1), s3);
    t.equal(await log.last(5), t1);
    const entries = await log.read(1, 0, 10);
    t.same(entries.map((e) => [e.seq, e.prev, e.id, text(e.record)]), [
      [s1, 0, 'a-1', 'one'],
      [s2, s1, 'a-2', 'two'],
      [s3, s2, 'a-3', 'three'],
    ]);
    t.same((await log.read(1, s1, 10)).map((e) => e.id), ['a-2', 'a-3'], 'read from a sequence');
    t.same((await log.read(1, s1, 1)).map((e) => e.id), ['a-2'], 'a read of one entry');
    t.same((await log.read(1, s2, 2)).map((e) => e.id), ['a-3'], 'a batch read near the end');
    t.same(await log.read(1, s3, 10), [], 'nothing after the last');
    t.same((await log.read(5, 0, 10)).map((e) => e.id), ['b-1'], 'the other shard keeps its own');
  });

  t.test('entries keep their order through batched reads', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    let last = 0;
    const seqs: number[] = [];
    for (let i = 0; i < 150; i++) {
      last = await log.append(2, last, `o-${i}`, bytes(`record ${i}`));
      seqs.push(last);
    }
    const entries = await readAll(log, 2, 0, 32);
    t.same(entries.map((e) => e.seq), seqs, 'every sequence, in order');
    t.same(entries.map((e) => text(e.record)), seqs.map((_, i) => `record ${i}`));
    t.ok(entries.every((e, i) => e.prev === (i === 0 ? 0 : seqs[i - 1])), 'each entry names the one before');
  });

  t.test('two writers race on the same expected sequence: exactly one wins each round', async (t) => {
    const a = await backend.open();
    const b = await backend.open();
    t.teardown(async () => {
      await a.close();
      await b.close();
    });
    const rounds = 20;
    let wins = 0;
    let storedThenVoided = 0;
    for (let round = 0; round < rounds; round++) {
      const expected = await a.last(3);
      const results = await Promise.allSettled([
        a.append(3, expected, `a-${round}`, bytes(`a ${round}`)),
        b.append(3, expected, `b-${round}`, bytes(`b ${round}`)),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (won.length !== 1 || lost.length !== 1) {
        t.fail(`round ${round}: ${won.length} won, ${lost.length} lost`);
        continue;
      }
      wins++;
      const seq = (won[0] as PromiseFulfilledResult<number>).value;
      const refusal: unknown = lost[0]!.reason;
      t.ok(refusal instanceof ShardLogFenced, `round ${round}: the loser is fenced`);
      // After a race that JetStream let through, its last sequence is unknown to the loser.
      if (refusal instanceof ShardLogFenced) t.ok(refusal.actual === null || refusal.actual >= seq, `round ${round}: the refusal names no older sequence`);
      if (refusal instanceof ShardLogFenced && refusal.actual === null) storedThenVoided++;
    }
    t.equal(wins, rounds);
    t.comment(`${storedThenVoided} of ${rounds} losers were stored by the log and found out by the chain check`);
    const entries = await readAll(a, 3);
    t.equal(entries.length, rounds, 'one entry per round');
    // A stale owner, far behind, is refused too.
    const first = entries[0]!.seq;
    await t.rejects(a.append(3, first, 'stale', bytes('stale')), ShardLogFenced);
    await t.rejects(a.append(3, 0, 'stale-0', bytes('stale')), ShardLogFenced, 'expecting an empty shard');
  });

  t.test('appending the same id again resolves to the first copy', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    const s1 = await log.append(4, 0, 'same', bytes('x'));
    t.equal(await log.append(4, 0, 'same', bytes('x')), s1, 'the retry names the landed copy');
    t.equal((await readAll(log, 4)).length, 1, 'and writes nothing');
    const s2 = await log.append(4, s1, 'next', bytes('y'));
    await t.rejects(log.append(4, 0, 'same-but-late', bytes('x')), ShardLogFenced, 'a new id after the shard moved on is refused');
    t.equal(await log.last(4), s2);
  });

  t.test('trim drops entries up to a sequence but keeps the last', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    const seqs: number[] = [];
    for (let i = 0; i < 10; i++) seqs.push(await log.append(6, seqs.at(-1) ?? 0, `t-${i}`, bytes(`${i}`)));
    await log.trim(6, seqs[4]!);
    await t.rejects(log.read(6, 0, 10), ShardLogTrimmed, 'reading the trimmed part says so');
    await t.rejects(log.read(6, seqs[2]!, 10), ShardLogTrimmed);
    t.same((await log.read(6, seqs[4]!, 10)).map((e) => e.id), ['t-5', 't-6', 't-7', 't-8', 't-9'], 'the rest is there');
    await log.trim(6, seqs[9]! + 1000);
    t.equal(await log.last(6), seqs[9], 'the last entry survives a trim past it');
    t.same((await log.read(6, seqs[8]!, 10)).map((e) => e.id), ['t-9']);
    const next = await log.append(6, seqs[9]!, 't-10', bytes('10'));
    t.ok(next > seqs[9]!, 'appends go on after a trim');
    await t.rejects(log.append(6, seqs[8]!, 'stale', bytes('x')), ShardLogFenced, 'and stay fenced');
  });

  t.test('a 1 MiB record goes through', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    const big = randomBytes(1024 * 1024);
    const s1 = await log.append(7, 0, 'big-1', big);
    const s2 = await log.append(7, s1, 'big-2', big.subarray(0, 1000));
    const entries = await log.read(7, 0, 10);
    t.equal(entries.length, 2);
    t.ok(Buffer.from(entries[0]!.record).equals(big), 'the large record reads back intact');
    t.equal(entries[1]!.seq, s2);
  });

  t.test('a record larger than one entry of the engine goes in pieces and reads whole', async (t) => {
    const log = await backend.open();
    const reader = await backend.open();
    t.teardown(async () => {
      await log.close();
      await reader.close();
    });
    // Above etcd's 1.5 MiB request limit and the JetStream streams' 8 MiB message limit.
    const huge = randomBytes(12 * 1024 * 1024);
    const tailed: ShardLogEntry[] = [];
    const tail = reader.tail(11, 0, async (entries) => void tailed.push(...entries));
    const s1 = await log.append(11, 0, 'huge-1', bytes('before'));
    const s2 = await log.append(11, s1, 'huge-2', huge);
    t.equal(await log.append(11, s1, 'huge-2', huge), s2, 'appending it again names the landed copy');
    const s3 = await log.append(11, s2, 'huge-3', bytes('after'));
    t.equal(await log.last(11), s3, 'the next append expected its sequence');
    const entries = await readAll(reader, 11);
    t.same(
      entries.map((e) => e.id),
      ['huge-1', 'huge-2', 'huge-3'],
      'one entry per record',
    );
    t.ok(Buffer.from(entries[1]!.record).equals(huge), 'the record reads back intact');
    t.same([entries[1]!.seq, entries[1]!.prev], [s2, s1], 'at the sequence its append returned, after the one it expected');
    t.same(
      (await reader.read(11, s1, 1)).map((e) => e.id),
      ['huge-2'],
      'a read of one entry after the expected sequence finds it (how an owner settles an append)',
    );
    const deadline = Date.now() + 10_000;
    while (tailed.length < 3 && Date.now() < deadline) await sleep(20);
    await tail.stop();
    t.same(
      tailed.map((e) => e.id),
      ['huge-1', 'huge-2', 'huge-3'],
      'a tail delivers it once, whole',
    );
    t.ok(tailed[1] && Buffer.from(tailed[1].record).equals(huge), 'intact');
  });

  t.test('the pieces of a record cut short are never read', async (t) => {
    const log = await backend.open();
    t.teardown(() => log.close());
    // Its writer was fenced or died between two pieces: the entry after them ends the series.
    const p0 = await log.append(12, 0, 'cut~0/3', bytes('a'));
    const p1 = await log.append(12, p0, 'cut~1/3', bytes('b'));
    const fence = await log.append(12, p1, 'fence', bytes('epoch'));
    t.same(
      (await readAll(log, 12)).map((e) => e.id),
      ['fence'],
      'a read skips them',
    );
    const tailed: string[] = [];
    const tail = log.tail(12, 0, async (entries) => void tailed.push(...entries.map((e) => e.id)));
    const deadline = Date.now() + 10_000;
    while (tailed.length < 1 && Date.now() < deadline) await sleep(20);
    await sleep(200);
    await tail.stop();
    t.same(tailed, ['fence'], 'so does a tail');
    // A series still being appended is read once its last piece is there.
    const q0 = await log.append(12, fence, 'open~0/2', bytes('c'));
    t.same(await log.read(12, fence, 10), [], 'not before');
    const q1 = await log.append(12, q0, 'open~1/2', bytes('d'));
    const [whole] = await log.read(12, fence, 10);
    t.same([whole?.id, whole?.seq, whole?.prev, text(whole?.record ?? new Uint8Array())], ['open', q1, fence, 'cd'], 'then as one record');
  });

  t.test('a tail delivers the backlog, then new entries, in order', async (t) => {
    const log = await backend.open();
    const writer = await backend.open();
    t.teardown(async () => {
      await log.close();
      await writer.close();
    });
    let last = 0;
    for (let i = 0; i < 20; i++) last = await writer.append(8, last, `tl-${i}`, bytes(`${i}`));
    const seen: ShardLogEntry[] = [];
    let batches = 0;
    const tail = log.tail(8, 0, async (entries) => {
      batches++;
      seen.push(...entries);
      await sleep(5);
    });
    for (let i = 20; i < 60; i++) last = await writer.append(8, last, `tl-${i}`, bytes(`${i}`));
    const deadline = Date.now() + 10_000;
    while (seen.length < 60 && Date.now() < deadline) await sleep(20);
    await tail.stop();
    await tail.done;
    t.same(seen.map((e) => e.id), Array.from({ length: 60 }, (_, i) => `tl-${i}`), 'every entry once, in order');
    t.ok(batches < 60, `entries arrive in batches (${batches} calls)`);
    // A tail that starts inside a trimmed range ends with ShardLogTrimmed.
    await writer.trim(8, seen[30]!.seq);
    const late = log.tail(8, 0, async () => undefined);
    await t.rejects(late.done, ShardLogTrimmed);
  });

  t.test('kill -9 of the leader during sequential appends loses no acknowledged append', async (t) => {
    const log = await backend.open();
    const follower = await backend.open();
    t.teardown(async () => {
      await log.close();
      await follower.close();
    });
    const shard = 9;
    const acked: Array<{ id: string; seq: number; at: number }> = [];
    // A follower tails the shard across the kill.
    const followed: ShardLogEntry[] = [];
    const tail = follower.tail(shard, 0, async (entries) => {
      followed.push(...entries);
    });
    let stop = false;
    const writer = (async () => {
      let last = 0;
      for (let i = 0; !stop; i++) {
        const id = `k-${i}`;
        last = await appendSettled(log, shard, last, id, bytes(id));
        acked.push({ id, seq: last, at: Date.now() });
      }
    })();
    await sleep(1000);
    const victim = await backend.leaderFor(shard);
    t.ok(victim >= 0, `member ${victim} leads shard ${shard}`);
    const killedAt = Date.now();
    const before = acked.length;
    await backend.engines.kill(victim);
    // Appends resume on the survivors; keep writing a while after they do.
    const deadline = killedAt + backend.maxOutageMs + 5000;
    while (Date.now() < deadline && acked.filter((a) => a.at > killedAt).length < 50) await sleep(100);
    stop = true;
    await writer;
    let outage = 0;
    for (let i = 1; i < acked.length; i++) outage = Math.max(outage, acked[i]!.at - acked[i - 1]!.at);
    t.ok(acked.length > before + 50, `appends resumed after the kill (${before} before, ${acked.length} in all)`);
    t.ok(outage < backend.maxOutageMs, `longest gap without an ack: ${outage} ms`);
    t.comment(`kill -9 of member ${victim}: ${acked.length} acknowledged, longest gap ${outage} ms`);
    const entries = await readAllSettled(log, shard, 0);
    t.same(entries.map((e) => [e.seq, e.id]), acked.map((a) => [a.seq, a.id]), 'every acknowledged append is there, once, in order');
    const tailDeadline = Date.now() + 15_000;
    while (followed.length < acked.length && Date.now() < tailDeadline) await sleep(100);
    await tail.stop();
    t.same(followed.map((e) => e.id), acked.map((a) => a.id), 'the tail delivered each of them once, in order, across the kill');

    // The killed member comes back and catches up: a client bound to it alone reads from the middle.
    await backend.engines.restart(victim);
    const middle = acked[Math.floor(acked.length / 2)]!;
    const rejoined = await backend.open(victim);
    t.teardown(() => rejoined.close());
    const tailEntries = await readAllSettled(rejoined, shard, middle.seq);
    const rest = acked.slice(acked.indexOf(middle) + 1);
    t.same(tailEntries.map((e) => e.id), rest.map((a) => a.id), `reading after ${middle.seq} through the restarted member`);
    const next = await appendSettled(rejoined, shard, acked.at(-1)!.seq, 'after-restart', bytes('x'));
    t.ok(next > acked.at(-1)!.seq, 'and appends through it');
  });
}
