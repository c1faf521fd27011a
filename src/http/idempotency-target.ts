import { orgActor, repoActor } from '../actors/actor-names.js';
import { shardOf } from '../actors/shard-map.js';
import type { RepoRecord } from '../storage/records.js';
import { repoShard } from '../storage/shards.js';
import type { RouteDef } from './route.js';

/** Where a request under an Idempotency-Key runs, and where the record of an earlier one can be. */
export interface IdempotencyTarget {
  /** The actor the route's command goes to; null when its repository is missing (it can only replay). */
  actor: string | null;
  /** The shards that may hold the key's record, the actor's first. */
  shards(now: number): number[];
}

/**
 * A record lives on the shard of the actor that ran the request (idempotency-store.ts). An org
 * route's actor is known from the org alone, so a rename or a delete repeated by the old path
 * still finds it. A repository route's actor is that of the repository its name resolves to now.
 */
export function idempotencyTarget(route: RouteDef, orgId: string, repo: RepoRecord | null): IdempotencyTarget {
  if (route.actor === 'org') {
    const actor = orgActor(orgId);
    return { actor, shards: () => [shardOf(actor)] };
  }
  return { actor: repo ? repoActor(repo.id) : null, shards: () => (repo ? [repoShard(repo.id)] : []) };
}
