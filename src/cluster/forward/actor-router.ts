import { performance } from 'node:perf_hooks';
import { shardOf } from '../../actors/shard-map.js';
import type { ActorCaller } from '../../actors/actor-caller.js';
import { encodeCall, type ActorCall, type ActorResponse } from '../../actors/runtime.js';
import { ACTOR_HEADER, ACTOR_PATH, COMMAND_HEADER, PROTOBUF, STALE_STATUS, decodeOutcome } from './actor-wire.js';
import type { ForwardMetrics } from './forward-metrics.js';
import { HOP_HEADER, ownerUnreachable } from './hop.js';
import type { PeerSessions } from './peer-sessions.js';
import type { ShardOwners } from './shard-owners.js';

/**
 * The cluster's ActorCaller: a message for a shard this node owns goes to the local runtime, any
 * other is forwarded once, as its protobuf ActorRequest, to the owner's internal listener
 * (actor-listener.ts), which answers the ActorReply. An owner's failure comes back as the same
 * ServiceError; a stale route comes back as 503 with Retry-After for the client to retry.
 */
export class ActorRouter implements ActorCaller {
  constructor(
    private readonly local: ActorCaller,
    private readonly owners: ShardOwners,
    private readonly peers: PeerSessions,
    private readonly metrics: ForwardMetrics,
  ) {}

  async call(call: ActorCall): Promise<ActorResponse> {
    const shard = shardOf(call.actor);
    const home = this.owners.home(shard);
    if (home.local) return this.local.call(call);
    const started = performance.now();
    let answer;
    try {
      const headers = { 'content-type': PROTOBUF, [HOP_HEADER]: String(shard), [ACTOR_HEADER]: call.actor, [COMMAND_HEADER]: call.command };
      answer = await this.peers.post(home.node.internalUrl, ACTOR_PATH, headers, encodeCall(call));
    } catch {
      this.metrics.observe('actor', 'unreachable', 0);
      throw ownerUnreachable(home.node.id);
    }
    if (answer.status !== 200 && answer.status !== STALE_STATUS) {
      this.metrics.observe('actor', 'unreachable', 0);
      throw ownerUnreachable(home.node.id);
    }
    this.metrics.observe('actor', answer.status === STALE_STATUS ? 'stale_route' : 'answered', (performance.now() - started) / 1000);
    return decodeOutcome(answer.body);
  }
}
