import type { ActorCall, ActorResponse } from './runtime.js';

/**
 * What sends a command to an actor by its key: the local runtime on a single node; in a cluster a
 * router that forwards a message for a shard this node does not own to its owner
 * (src/cluster/forward/actor-router.ts). Routes, sagas, quota refills and the system actors
 * see only this.
 */
export interface ActorCaller {
  call(call: ActorCall): Promise<ActorResponse>;
}
