import type { ServiceError } from '../errors.js';

/**
 * What the mailbox asks of cluster mode's replication (src/cluster/replica/worker-replicas.ts);
 * absent on a single node. A shard's commands run only while this node is its active owner; a
 * batch's write set per shard is appended to the shard's log after the local commit; replies are
 * released when both are done.
 */
export interface BatchReplication {
  /** The error to answer a command of `shard` with instead of running it, or null. */
  refuse(shard: number): ServiceError | null;
  /** Inside the batch's transaction, after its commands: the shards it wrote. */
  sealing(shards: Iterable<number>): void;
  /** After the transaction committed: each written shard's write set, to append to its log. */
  committed(writeSets: ReadonlyMap<number, Uint8Array>): void;
  /** Settles when every batch committed so far for `shard` is in the log: null, or the error to answer. */
  settled(shard: number): Promise<ServiceError | null>;
}
