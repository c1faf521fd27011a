import type { ReplicaRole, ShardReport } from './replica-report.js';

/** One shard's assignment, as the front end tells the shard's worker. */
export interface ShardAssignment {
  shard: number;
  role: ReplicaRole;
  epoch: number;
}

/**
 * Messages from the front end to a worker's replicas (runtime.control). Every one answers with
 * the reports of the worker's shards: `assign` with all of them, `changes` with those whose state
 * changed since the last `changes`, waiting up to `waitMs` for one.
 */
export type ReplicaControl = { type: 'assign'; assignments: ShardAssignment[] } | { type: 'changes'; waitMs: number };

export type ReplicaControlReply = ShardReport[];
