/**
 * Cluster mode: what the front end reads of a shard it serves is answered only once the shard's
 * log holds every commit the read may have seen (src/cluster/replica/acknowledged-reads.ts).
 *
 * A commit is visible in LMDB before its write set is in the shard's log, and an append can
 * still be refused or never confirmed; the shard's copy here is then dropped and the commit is
 * lost. A read that returned it would have shown a value the cluster never committed. So a read
 * notes the shards it reads; before its answer leaves, the commit count each of them has in the
 * snapshot read is compared with what the log acknowledged, and the answer waits for the rest (a
 * 503 with Retry-After when it does not land). Nothing in flight: answered at once, in the same
 * step. Absent on a single node, which has no log.
 */
export interface ReadFence {
  /** A request about to read shards served here. */
  open(): ReadTicket;
  /**
   * Reads of `shards` were just made in the thread's current read snapshot (a gather's local
   * keys, a peer's read): null when the log holds everything they saw, else a promise settling
   * once it does (rejecting with a 503 when it never will).
   */
  made(shards: Iterable<number>): Promise<void> | null;
}

export interface ReadTicket {
  /** The request reads `shard` here (no-op for a shard not served here: nothing of it is read here). */
  read(shard: number): void;
  /**
   * Runs `outcome` and hands on what it returns or throws once every shard read holds nothing
   * unacknowledged the reads may have seen. `replies: false` lets replies through at once and
   * holds only what it throws: the reply of a command comes from its actor, which waits for
   * its shards' appends itself.
   */
  answer<T>(outcome: () => T | Promise<T>, replies: boolean): T | Promise<T>;
}
