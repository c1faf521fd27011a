/**
 * The replicated log of one shard's write sets: the durability and the fence of cluster mode. An
 * owner appends each batch's write set conditionally on the last sequence it has seen; an append
 * from a stale owner (one that missed a newer record) is refused with `ShardLogFenced`. Followers
 * read and tail the log into their own LMDB. Implemented on NATS JetStream and on etcd.
 *
 * Sequences increase per shard but need not be contiguous (JetStream numbers a whole stream).
 * 0 means "nothing appended yet".
 */
export interface ShardLog {
  /** Appends `record` iff the shard's last sequence is `expectedLast`; resolves to its sequence. */
  append(shard: number, expectedLast: number, record: Uint8Array): Promise<number>;
  /** The shard's last sequence (0 when empty), read from the log's leader. */
  last(shard: number): Promise<number>;
  /** Up to `limit` entries with a sequence above `after`, in order. */
  read(shard: number, after: number, limit: number): Promise<ShardLogEntry[]>;
  /** Drops the entries up to and including `upTo` (a snapshot covers them). */
  trim(shard: number, upTo: number): Promise<void>;
  close(): Promise<void>;
}

export interface ShardLogEntry {
  seq: number;
  record: Uint8Array;
}
