import { orgActor, repoActor } from '../actors/actor-names.js';
import { shardOf } from '../actors/shard-map.js';

/** The shard that owns a repository's data: its actor's. */
export const repoShard = (repoId: string): number => shardOf(repoActor(repoId));

/** The shard that owns an org's shard-level data (repository names and list, sagas, sync list, quota ledger): its actor's. */
export const orgShard = (orgId: string): number => shardOf(orgActor(orgId));
