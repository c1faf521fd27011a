/** What the placement asks of a node for one shard. */
export type ReplicaRole = 'owner' | 'follower' | 'none';

/** Where a shard's copy on this node stands (shard-replica.ts has the transitions). */
export type ReplicaState = 'idle' | 'follower' | 'catching-up' | 'active' | 'demoted' | 'divergent' | 'seeding';

/**
 * One shard's replica as its worker reports it to the front end (which serves only `active`
 * shards) and to the cluster status. Sequences are the shard log's: a follower's lag is the
 * owner's `applied` minus its own (0 when caught up; JetStream numbers a whole stream, so the
 * difference is not a count of records).
 */
export interface ShardReport {
  shard: number;
  state: ReplicaState;
  role: ReplicaRole;
  epoch: number;
  /** The last log sequence the local data reflects (an owner's: its last acknowledged append). */
  applied: number;
  /**
   * A follower's distance to the log's last sequence when it last looked (0 when caught up; in
   * sequence numbers, an upper bound of the records it misses).
   */
  lag: number;
  /** Activations of this shard on this node. */
  moves: number;
  /**
   * The sequence this node last trimmed the shard's log up to, as its owner (0: never): the log
   * keeps the entries after it.
   */
  trimmedTo: number;
}
