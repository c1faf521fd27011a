import { COMMIT_NO_SYNC, type Storage } from './database.js';
import { K } from './keys.js';
import { clearShard } from './shard-stream.js';

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

export function readReplicaPosition(storage: Storage, shard: number): ReplicaPosition & { dirty: boolean; commits: number } {
  const position = (storage.meta.get(K.appliedPosition(shard)) as ReplicaPosition | undefined) ?? NONE;
  const commits = commitCount(storage, shard);
  return { ...position, commits, dirty: commits > position.commit };
}

function commitCount(storage: Storage, shard: number): number {
  return (storage.meta.get(K.commitCount(shard)) as number | undefined) ?? 0;
}

/** Inside a transaction that wrote the shard: its commit number. */
export function sealCommit(storage: Storage, shard: number): number {
  const next = commitCount(storage, shard) + 1;
  storage.meta.putSync(K.commitCount(shard), next);
  return next;
}

/**
 * After a log acknowledgement. Its own transaction, committed without waiting for the disk:
 * losing it in a crash leaves an older position, which only costs a rebuild.
 */
export function markAcknowledged(storage: Storage, shard: number, position: ReplicaPosition): void {
  storage.root.transactionSync(() => storage.meta.putSync(K.appliedPosition(shard), position), COMMIT_NO_SYNC);
}

/**
 * A follower's step: applies log entries' write sets in order and records the position, in one
 * transaction (not waited for on disk: the log holds the truth, and a position that rolls back
 * with its data is read from the log again). The position is written here only, once per step,
 * not per set. The sets carry the owner's commit count.
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
  }, COMMIT_NO_SYNC);
}

/** Drops everything the shard holds here (position and count included), to rebuild it from the log. */
export function dropShardData(storage: Storage, shard: number): void {
  storage.root.transactionSync(() => clearShard(storage, shard), COMMIT_NO_SYNC);
}
