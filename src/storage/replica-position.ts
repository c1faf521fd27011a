import type { Storage } from './database.js';
import { K, Ranges } from './keys.js';

/**
 * Where a shard's local data stands against its shard log (cluster mode), kept under the shard's
 * own range so that it is written in the same transaction as the data it describes and travels
 * with the shard in a snapshot.
 *
 * `applied` is the last log sequence whose records the data holds. `dirty` is set by an owner's
 * batch transaction and cleared once every batch it committed is acknowledged by the log: a
 * dirty shard may hold writes the log never accepted (a crash between the local commit and the
 * append), so it is rebuilt from the log before this node serves or follows it again.
 */
export interface ReplicaPosition {
  applied: number;
  dirty: boolean;
}

const NONE: ReplicaPosition = { applied: 0, dirty: false };

export function readReplicaPosition(storage: Storage, shard: number): ReplicaPosition {
  const value = storage.meta.get(K.replicaPosition(shard)) as ReplicaPosition | undefined;
  return value ?? NONE;
}

/** Inside a batch's write transaction: the batch holds writes the log has not acknowledged yet. */
export function markUnacknowledged(storage: Storage, shard: number, applied: number): void {
  storage.meta.putSync(K.replicaPosition(shard), { applied, dirty: true } satisfies ReplicaPosition);
}

/**
 * After a log acknowledgement: the data reflects the log up to `applied`, plus unacknowledged
 * batches iff `dirty`. Its own transaction, committed without waiting for the disk: losing it in
 * a crash leaves the earlier dirty mark, which only costs a rebuild.
 */
export function markAcknowledged(storage: Storage, shard: number, applied: number, dirty: boolean): void {
  storage.root.transactionSync(() => storage.meta.putSync(K.replicaPosition(shard), { applied, dirty } satisfies ReplicaPosition));
}

/**
 * A follower's step: applies log entries' write sets in order and records the last sequence, in
 * one transaction (not waited for on disk: the log holds the truth, and a position that rolls
 * back with its data is re-read from the log).
 */
export function applyLogEntries(storage: Storage, shard: number, entries: Array<{ seq: number; writeSets: Uint8Array[] }>, apply: (storage: Storage, writeSet: Uint8Array) => void): void {
  if (entries.length === 0) return;
  storage.root.transactionSync(() => {
    for (const entry of entries) for (const ws of entry.writeSets) apply(storage, ws);
    storage.meta.putSync(K.replicaPosition(shard), { applied: entries[entries.length - 1]!.seq, dirty: false } satisfies ReplicaPosition);
  });
}

/** Drops everything the shard holds here (its position included), to rebuild it from the log. */
export function dropShardData(storage: Storage, shard: number): void {
  const range = Ranges.shard(shard);
  storage.root.transactionSync(() => {
    for (const db of [storage.meta, storage.objects, storage.chunks] as const) {
      for (const key of [...db.getKeys(range)]) db.removeSync(key);
    }
  });
}
