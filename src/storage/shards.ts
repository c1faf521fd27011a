import { orgActor, repoActor } from '../actors/actor-names.js';
import { shardOfPrefixed } from '../actors/shard-map.js';
import type { EventEnvelope } from './records.js';

/** The shard that owns a repository's data: its actor's (`shardOf(repoActor(repoId))`). */
export const repoShard = shardOfPrefixed(repoActor(''));

/** The shard that owns an org's shard-level data (repository names and list, sagas, quota ledger): its actor's. */
export const orgShard = shardOfPrefixed(orgActor(''));

/**
 * The shard whose actor writes a repository's events (the org's, for an event of no repository):
 * the events' outbox entries, and the deliveries fanned out of them, live there (webhook-store.ts).
 */
export const laneShard = (orgId: string, repoId: string | null): number => (repoId === null ? orgShard(orgId) : repoShard(repoId));

/** The shard whose outbox keeps an event (outbox.ts): its lane's. */
export const eventShard = (event: EventEnvelope): number => laneShard(event.organization.id, event.repository?.id ?? null);

/** What the shard of a webhook delivery depends on (fields of its record). */
export interface DeliveryOwner {
  org_id: string;
  repo_id: string | null;
  redelivery_of: string | null;
}

/**
 * The shard of a webhook delivery: the shard of the actor that created it. The fan-out of the
 * event's shard made an original; the org's actor makes a redelivery.
 */
export const deliveryShard = (d: DeliveryOwner): number =>
  d.redelivery_of === null ? laneShard(d.org_id, d.repo_id) : orgShard(d.org_id);
