/**
 * How the threads of a cluster node reach its shard replicas, which live on the main thread (the
 * one place that sees the writes of every thread: actor workers and the system actors' pools).
 * BroadcastChannels, because threads of several pools must reach the main thread and be reached
 * by it without a port handed to each.
 *
 * - APPEND: a thread's committed write sets, one message per transaction, to the main thread.
 * - ack(thread): the main thread's answer, once every set of the transaction is in its shard's
 *   log or refused (or, for a barrier, once what it waits for is).
 * - SERVING: the shards this node serves now (main → threads, after every change, and in answer
 *   to a thread's `hello`), so an actor worker refuses a shard's commands before running them.
 */
export const APPEND_CHANNEL = 'repohost.replica.append';
export const SERVING_CHANNEL = 'repohost.replica.serving';
export const ackChannel = (thread: number): string => `repohost.replica.ack.${thread}`;

export interface AppendRequest {
  thread: number;
  id: number;
  sets: Array<{
    shard: number;
    /** The shard's local commit number (replica-position.ts): orders sets from several threads. */
    commit: number;
    bytes: Uint8Array;
  }>;
  /**
   * Shards whose earlier sets must be in the log before the answer: a batch that wrote nothing
   * there may still have read what an append in flight carries.
   */
  barrier: number[];
  /**
   * Commits that must be in the log before the answer, as a read snapshot showed them: a thread
   * about to let what it read leave the node (a push upstream) waits for them like a read.
   */
  through?: Array<{ shard: number; commit: number }>;
}

export interface AppendReply {
  id: number;
  /** Shards whose sets are not in the log: their commands are answered 503. */
  refused: number[];
}

export type ServingMessage = { type: 'hello' } | { type: 'serving'; flags: Uint8Array };
