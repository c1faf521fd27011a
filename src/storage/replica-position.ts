import type { Transaction } from 'lmdb';
import { COMMIT_THEN_SYNC, NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import type { Storage } from './database.js';
import { K } from './keys.js';
import { clearShard, importShardSteps } from './shard-stream.js';

/**
 * Where a shard's local data stands against its shard log (cluster mode), kept under the shard's
 * own range: written in the same transaction as the data it describes, and part of the shard.
 *
 * Every transaction that writes the shard raises its commit count `[s, 'commits']` (under LMDB's
 * write lock, so the numbers are contiguous whichever thread commits): the owner appends the
 * write sets in that order. The position records the last log sequence the data reflects and the
 * commit count it covers. A count above it means the data holds a commit the log never
 * acknowledged (a crash between the local commit and the append): that copy is rebuilt from the
 * log before this node serves or follows the shard again.
 *
 * A shard being cleared, or copied from a peer (when the log no longer holds what this copy
 * misses), carries the marker `[s, 'importing']` from the first transaction that changes it to
 * the last: the clearing and the copy take many bounded transactions, and a copy that a crash
 * cut short reads as dirty too, so it is cleared and copied again rather than served.
 */
export interface ReplicaPosition {
  /** The last log sequence the data reflects (0: none). */
  seq: number;
  /** The epoch of the owner that appended it. */
  epoch: number;
  /** The commit count of the shard's data at `seq`. */
  commit: number;
}

const NONE: ReplicaPosition = { seq: 0, epoch: 0, commit: 0 };

/** The shard's position here, as of `txn` when given (a snapshot a peer copies). */
export function readReplicaPosition(storage: Storage, shard: number, txn?: Transaction): ReplicaPosition & { dirty: boolean; commits: number } {
  const at = txn ? { transaction: txn } : undefined;
  const position = (storage.meta.get(K.appliedPosition(shard), at) as ReplicaPosition | undefined) ?? NONE;
  const commits = commitCount(storage, shard, txn);
  const importing = storage.meta.get(K.shardImporting(shard), at) !== undefined;
  return { ...position, commits, dirty: importing || commits > position.commit };
}

/** How many commits the shard's data here holds, as of `txn` when given, else of the thread's read snapshot. */
export function commitCount(storage: Storage, shard: number, txn?: Transaction): number {
  return (storage.meta.get(K.commitCount(shard), txn ? { transaction: txn } : undefined) as number | undefined) ?? 0;
}

/** Inside a transaction that wrote the shard: its commit number. */
export function sealCommit(storage: Storage, shard: number): number {
  const next = commitCount(storage, shard) + 1;
  storage.meta.putSync(K.commitCount(shard), next);
  return next;
}

/**
 * After a log acknowledgement. Its own transaction (a child one inside a batch). Were it lost in a
 * crash, an older position would only cost a rebuild. Never moves the position back: a mark
 * written late (batched) must not undo a newer one.
 */
export function markAcknowledged(storage: Storage, shard: number, position: ReplicaPosition): void {
  storage.root.transactionSync(() => {
    const current = storage.meta.get(K.appliedPosition(shard)) as ReplicaPosition | undefined;
    if (current === undefined || current.seq < position.seq) storage.meta.putSync(K.appliedPosition(shard), position);
  }, NESTABLE_COMMIT_THEN_SYNC);
}

/**
 * A follower's step: applies log entries' write sets in order and records the position, in one
 * transaction (the log holds the truth: a position that rolled back with its data would be read
 * from the log again). The position is written here only, once per step, not per set. The sets
 * carry the owner's commit count.
 */
export function applyLogEntries(
  storage: Storage,
  shard: number,
  entries: Array<{ seq: number; epoch: number; writeSets: Uint8Array[] }>,
  apply: (storage: Storage, writeSet: Uint8Array) => void,
): void {
  if (entries.length === 0) return;
  const last = entries[entries.length - 1]!;
  storage.root.transactionSync(() => {
    for (const entry of entries) for (const ws of entry.writeSets) apply(storage, ws);
    storage.meta.putSync(K.appliedPosition(shard), { seq: last.seq, epoch: last.epoch, commit: commitCount(storage, shard) } satisfies ReplicaPosition);
  }, NESTABLE_COMMIT_THEN_SYNC);
}

/** Keys deleted per transaction when a shard is cleared. */
const CLEAR_STEP_KEYS = 2000;

/** Lets the thread's other work run between two bounded transactions of a long job. */
const pause = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Marks the shard as importing, then deletes the rest of what it holds here, a step at a time. */
async function clearShardStepped(storage: Storage, shard: number): Promise<void> {
  const marker = K.shardImporting(shard);
  storage.root.transactionSync(() => storage.meta.putSync(marker, true), NESTABLE_COMMIT_THEN_SYNC);
  while (storage.root.transactionSync(() => clearShard(storage, shard, { limit: CLEAR_STEP_KEYS, keep: marker }), NESTABLE_COMMIT_THEN_SYNC) > 0) await pause();
}

/** Drops everything the shard holds here (position and count included), to rebuild it from the log. */
export async function dropShardData(storage: Storage, shard: number): Promise<void> {
  await clearShardStepped(storage, shard);
  storage.root.transactionSync(() => storage.meta.removeSync(K.shardImporting(shard)), NESTABLE_COMMIT_THEN_SYNC);
}

/**
 * Replaces the shard's data here with a peer's copy (a shard file, shard-stream.ts), in bounded
 * transactions; returns the position the copy carries. The marker goes in the last transaction,
 * which waits for the disk: from then the copy is whole and durable. A damaged file throws with
 * the marker still set.
 */
export async function importShardCopy(storage: Storage, shard: number, file: string): Promise<ReplicaPosition & { records: number }> {
  await clearShardStepped(storage, shard);
  const steps = importShardSteps(storage, file, shard);
  let step = steps.next();
  for (; !step.done; step = steps.next()) await pause();
  const position = storage.root.transactionSync(() => {
    const copied = (storage.meta.get(K.appliedPosition(shard)) as ReplicaPosition | undefined) ?? NONE;
    // Thrown inside the transaction: the marker stays.
    if (commitCount(storage, shard) !== copied.commit || copied.seq === 0) throw new Error(`shard ${shard}: the copy received is not at a log position`);
    storage.meta.removeSync(K.shardImporting(shard));
    return copied;
  }, COMMIT_THEN_SYNC);
  return { ...position, records: step.value };
}

/**
 * Flushes every commit made so far to disk, off the thread (LMDB's environment sync in lmdb-js's
 * worker pool): after it, the positions a follower applied are durable, and the owner may trim its
 * log up to them. Each commit syncs on its own too (commit-flags.ts), so this mostly finds them synced.
 */
export function syncToDisk(storage: Storage): Promise<void> {
  const root = storage.root as unknown as { sync(done: (err?: Error) => void): void };
  return new Promise((resolve, reject) => root.sync((err) => (err ? reject(err) : resolve())));
}
