import t from 'tap';
import { ServiceError, isServiceError } from '../../src/errors.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { shardOf, slotOf } from '../../src/actors/shard-map.js';
import { busyWriters } from '../../src/actors/writer-activity.js';
import { fixture, principal, startRuntime } from './runtime.js';

/**
 * The actor runtime on its own (no HTTP): shard affinity, per-actor order, batching, and what
 * happens when a worker thread dies in the middle of a batch.
 */
interface Placement {
  thread: number;
  seq: number;
  /** Actor threads with a batch under way as the command ran (writer-activity.ts). */
  writers: number;
}

/** Where `test.put` applied `key`: the fixture records its thread and arrival number with the write. */
/**
 * Which thread wrote `key`. The workers commit on their own threads: this thread's LMDB snapshot
 * is renewed first, or a read in the same turn as an earlier one would not see the commit.
 */
const placementOf = (storage: Storage, key: string): Placement => {
  storage.root.resetReadTxn();
  return storage.meta.get(['test', key]) as Placement;
};


/** Actor keys whose shards land on worker slot `slot` of `workers`. */
function actorsOnSlot(slot: number, workers: number, count: number, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) if (slotOf(shardOf(`repo:${prefix}${i}`), workers) === slot) out.push(`repo:${prefix}${i}`);
  return out;
}

/** Settles within `ms` or fails: a hang is the failure this file guards against. */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

t.test('runtime - one actor always runs on one thread, in arrival order; actors spread over workers', async (t) => {
  const batches: number[] = [];
  const rt = startRuntime({ commandsModule: fixture('crash-commands'), onBatch: (b) => b.batchSize > 0 && batches.push(b.batchSize) });
  const storage = openStorage(rt.dataDir);
  t.teardown(async () => {
    await storage.close();
    await rt.cleanup();
  });
  const call = (actor: string, key: string) => rt.runtime.call({ actor, command: 'test.put', input: { key }, principal: principal(), traceId: 't' });

  const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => call('repo:hot', `hot-${i}`)));
  const placements = replies.map((_, i) => placementOf(storage, `hot-${i}`));
  t.ok(replies.every((r) => r.status === 201));
  t.equal(new Set(placements.map((p) => p.thread)).size, 1, 'every message of the actor ran on the same thread');
  t.ok(placements.every((p, i) => i === 0 || p.seq > placements[i - 1]!.seq), 'applied in the order they were sent');
  t.ok(batches.some((b) => b > 1), `messages that arrive together commit together (batch sizes ${[...new Set(batches)].join(',')})`);
  t.equal(batches.reduce((a, b) => a + b, 0), 200, 'every message was in exactly one batch');
  t.ok(placements.every((p) => p.writers >= 1), 'a batch counts as under way while its commands run (clones wait for it)');
  t.equal(busyWriters(), 0, 'and no longer once answered');

  const [a0, a1] = actorsOnSlot(0, 2, 2, 'spread');
  const [b0] = actorsOnSlot(1, 2, 1, 'spread');
  await Promise.all([call(a0!, 'a0'), call(a1!, 'a1'), call(b0!, 'b0')]);
  const p = ['a0', 'a1', 'b0'].map((key) => placementOf(storage, key).thread);
  t.equal(p[0], p[1], 'actors of the same slot share a thread');
  t.not(p[0], p[2], 'actors of different slots run on different threads');
  t.equal(rt.runtime.workerCount, 2);
});

t.test('runtime - a worker that dies mid-batch fails its in-flight messages with 503, is replaced, and the next call succeeds', async (t) => {
  const rt = startRuntime({ commandsModule: fixture('crash-commands') });
  const storage = openStorage(rt.dataDir);
  t.teardown(async () => {
    await storage.close();
    await rt.cleanup();
  });
  const [victim, neighbour] = actorsOnSlot(0, 2, 2, 'victim');
  const [bystander] = actorsOnSlot(1, 2, 1, 'bystander');
  const call = (actor: string, command: string, key: string) =>
    rt.runtime.call({ actor, command, input: { key }, principal: principal(), traceId: `trace-${key}` }).then(
      (r) => ({ status: r.status, placement: placementOf(storage, key) }),
      (err: unknown) => ({ status: isServiceError(err) ? err.status : -1, code: isServiceError(err) ? err.code : String(err), retryAfter: isServiceError(err) ? err.retryAfter : undefined }),
    );

  const before = await call(victim!, 'test.put', 'before');
  const other = await call(bystander!, 'test.put', 'other-before');
  t.equal(before.status, 201);
  const deadThread = (before as { placement: Placement }).placement.thread;
  const otherThread = (other as { placement: Placement }).placement.thread;

  // Messages to the victim's worker sent together with the crash: they share its mailbox.
  const inFlight = await within(15000, Promise.all([call(victim!, 'test.put', 'along-1'), call(victim!, 'test.crash', 'crash'), call(neighbour!, 'test.put', 'along-2')]));
  const crashed = inFlight[1] as { status: number; code: string; retryAfter?: number };
  t.equal(crashed.status, 503, 'the crashing message gets 503');
  t.equal(crashed.code, 'UNAVAILABLE');
  t.equal(crashed.retryAfter, 1, 'with a retry hint');
  for (const r of inFlight) t.ok(r.status === 503 || r.status === 201, `in-flight messages are answered (${r.status}), never left hanging`);
  t.ok(inFlight.filter((r) => r.status === 503).length >= 1);

  const after = await within(15000, call(victim!, 'test.put', 'after'));
  t.equal(after.status, 201, 'the next call to the same actor succeeds');
  const newThread = (after as { placement: Placement }).placement.thread;
  t.not(newThread, deadThread, 'on the replacement thread');
  const neighbourAfter = await within(15000, call(neighbour!, 'test.put', 'neighbour-after'));
  t.equal((neighbourAfter as { placement: Placement }).placement.thread, newThread, 'the replacement took over the dead worker\'s whole slot');
  const otherAfter = await within(15000, call(bystander!, 'test.put', 'other-after'));
  t.equal((otherAfter as { placement: Placement }).placement.thread, otherThread, 'the other slot did not move');

  t.equal(storage.meta.get(['test', 'crash']), undefined, 'the crashing command\'s write was rolled back');
  t.ok(storage.meta.get(['test', 'after']), 'later writes are on disk');
  t.ok(storage.meta.get(['test', 'neighbour-after']));

  // A second crash: still answered, still replaced.
  const again = await within(15000, call(victim!, 'test.crash', 'crash-2'));
  t.equal(again.status, 503);
  t.equal((await within(15000, call(victim!, 'test.put', 'after-2'))).status, 201);
  t.equal(busyWriters(), 0, 'no batch of a dead thread still counts as under way');
});

t.test('runtime - an actor\'s error arrives whole: code, message, details, retryable and retry hint', async (t) => {
  const rt = startRuntime({ commandsModule: fixture('crash-commands') });
  t.teardown(rt.cleanup);
  const asks = [
    { code: 'ABORTED', retryable: true },
    { code: 'UNAVAILABLE', retryable: false, retry_after: 7 },
    { code: 'FORBIDDEN', retryable: false },
  ] as const;
  for (const input of asks) {
    const err = await rt.runtime.call({ actor: 'repo:refusing', command: 'test.refuse', input, principal: principal(), traceId: 't' }).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(isServiceError(err), `${input.code} is a ServiceError`);
    if (!isServiceError(err)) continue;
    t.equal(err.code, input.code);
    t.equal(err.message, `refused with ${input.code}`);
    t.same(err.details, { asked: input });
    t.equal(err.retryable, input.retryable, `${input.code}: retryable is ${input.retryable}, whatever the code's default`);
    t.equal(err.retryAfter, 'retry_after' in input ? input.retry_after : undefined);
  }
  // The read pool's threads post toJSON's data (a structured clone) and rebuild it with fromJSON.
  const posted = structuredClone(new ServiceError('UNAVAILABLE', 'busy', undefined, { retryable: false }).toJSON());
  t.equal(ServiceError.fromJSON(posted).retryable, false, 'a code\'s default does not overwrite what was sent');
});

t.test('runtime - a full mailbox is refused with 429 before anything is queued; closing refuses with 503 after in-flight calls finish', async (t) => {
  const rt = startRuntime({ commandsModule: fixture('crash-commands'), mailboxLimit: 3 });
  const put = (actor: string, key: string) => rt.runtime.call({ actor, command: 'test.put', input: { key }, principal: principal(), traceId: 't' });
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      put('repo:busy', `busy-${i}`).then(
        (r) => r.status,
        (err: unknown) => (isServiceError(err) && err.code === 'RATE_LIMITED' && err.retryAfter === 1 ? 429 : -1),
      ),
    ),
  );
  t.equal(results.filter((s) => s === 201).length, 3, 'the first three fit in the mailbox');
  t.equal(results.filter((s) => s === 429).length, 17, 'the rest are refused at once');
  t.same(rt.runtime.mailboxDepths(), [0, 0], 'depth returns to zero once answered');
  t.equal((await put('repo:busy', 'busy-later')).status, 201, 'accepted again once drained');

  const pending = put('repo:closing', 'closing');
  const closed = rt.runtime.close();
  const refused = await put('repo:closing', 'late').then(
    () => 'accepted',
    (err: unknown) => (isServiceError(err) ? err.code : String(err)),
  );
  t.equal(refused, 'UNAVAILABLE', 'a call after close is refused');
  t.equal((await pending).status, 201, 'the in-flight call was answered');
  await closed;
  await rt.cleanup();
});
