/**
 * The physical writes of committed transactions, as a replica needs them: which database, put or
 * delete, the key's bytes and the value's stored bytes. Physical ops replay deterministically (no
 * command runs again, no clock or ULID is read again) and reproduce the exact stored bytes.
 */

/** The databases of `Storage` that ops address (`database.ts`). */
export type WriteDb = 'meta' | 'objects' | 'chunks';

export interface WriteOp {
  db: WriteDb;
  /** `delRange` removes every key from `key` (included) to `end` (excluded): a repository's deletion. */
  kind: 'put' | 'del' | 'delRange';
  /** The key as LMDB stores it (lmdb-js's ordered-binary encoding of the tuple). */
  key: Uint8Array;
  /** `put` only: the value as LMDB stores it (msgpack for `meta`, the bytes for the others). */
  value?: Uint8Array;
  /** `delRange` only: the end of the range, encoded like a key. */
  end?: Uint8Array;
}

/** One shard's ops of one committed transaction, in the order they were made. */
export interface ShardWrites {
  shard: number;
  ops: WriteOp[];
  /** The shard's commit number, when the recorder seals its transactions (cluster mode). */
  commit?: number;
}

/** The unit a shard's log carries and a follower applies (codec: write-set-codec.ts). */
export interface WriteSet extends ShardWrites {
  /** The placement epoch of the owner that committed it. */
  epoch: number;
  /** Names the batch on the owner (repeats of one append are recognized by it). */
  batchId: string;
}

/** What one committed transaction wrote. */
export interface CommittedWrites {
  /**
   * The commit order on this node: a monotonic clock (shared by every thread of the process) read
   * inside the transaction, while LMDB's write lock is held, so a later commit always reads more.
   * Transactions that touch the same shard from different threads are ordered by it.
   */
  order: bigint;
  /** Ascending by shard; a shard appears once. */
  shards: ShardWrites[];
  /**
   * Writes to global keys (first key part a string: `cfg`, `org`, `key`, `['o', org, …]`, and the
   * queues not yet moved into shards): not shard data, listed so that a caller can see them.
   */
  global: WriteOp[];
}

/**
 * Receives each committed transaction's writes, after the commit (locally durable). A batch's
 * replies wait for the promise it returns; it resolves to the shards whose writes could not be
 * replicated (their commands are answered 503), or to nothing when all were. Writers outside the
 * mailbox do not wait for it, so it reports a failure by resolving, not by rejecting (a rejection
 * nobody handles ends the process).
 */
export type WriteSink = (writes: CommittedWrites) => void | Promise<void | readonly number[]>;
