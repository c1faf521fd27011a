import { ShardLogTrimmed, type ShardLogEntry } from '../shard-log.js';

/**
 * Walks a shard's stored entries in order and says which are valid. An entry is valid iff its
 * `prev` is the sequence of the entry stored right before it: its append's condition held when it
 * was stored. A `prev` below that marks an append that should have been refused: nats-server
 * checks the expected sequence only before it proposes a message to its Raft group, so two
 * concurrent appends expecting the same sequence can both be stored (nats-server#4320; measured
 * on 2.9.10 by test/cluster/shard-log-jetstream.test.ts). A `prev` above it means the entries in
 * between were trimmed. etcd checks in its transaction, so there every entry is valid.
 */
export class EntryChain {
  constructor(
    private readonly shard: number,
    /** The last stored sequence walked past (valid or not). */
    public cursor: number,
  ) {}

  /** Whether `entry`, the next one stored, is valid; throws `ShardLogTrimmed` at a gap. */
  accept(entry: ShardLogEntry): boolean {
    if (entry.seq <= this.cursor) return false;
    const before = this.cursor;
    this.cursor = entry.seq;
    if (entry.prev === before) return true;
    if (entry.prev < before) return false;
    throw new ShardLogTrimmed(this.shard, before);
  }
}
