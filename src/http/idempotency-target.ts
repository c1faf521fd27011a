import type { Database, Key } from 'lmdb';
import { orgActor, repoActor } from '../actors/actor-names.js';
import { shardOf } from '../actors/shard-map.js';
import type { RepoRecord } from '../storage/records.js';
import { recentHoldersOf } from '../storage/released-names.js';
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
 * still finds it. A repository route is addressed by name, and the name may have been renamed
 * away, deleted or taken by another repository since the first request: the repositories that
 * gave the name up in the last 24 h are looked at too, so such a repeat replays, and is never
 * applied to the name's new holder. Read after `repo` was resolved by name: a name given up after
 * that shows among the holders.
 */
export function idempotencyTarget(meta: Database<unknown, Key>, route: RouteDef, orgId: string, repoName: string | undefined, repo: RepoRecord | null): IdempotencyTarget {
  const repoShards = (now: number): number[] => {
    const holders = recentHoldersOf(meta, orgId, repoName!, now);
    return (repo ? [repo.id, ...holders] : holders).map(repoShard);
  };
  if (route.actor === 'org') {
    const actor = orgActor(orgId);
    // An org route that names a repository (PATCH /{org}/{repo}) is a saga whose repository step
    // may have been the one that recorded the outcome (an update without a rename, or its error).
    return { actor, shards: (now) => [...new Set([shardOf(actor), ...(repoName === undefined ? [] : repoShards(now))])] };
  }
  return { actor: repo ? repoActor(repo.id) : null, shards: (now) => [...new Set(repoShards(now))] };
}
