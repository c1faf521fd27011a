import type { Database, Key } from 'lmdb';
import { K, under } from '../../../storage/keys.js';

/** The webhook records kept in LMDB (layout in `storage/keys.ts`). Timestamps are ISO-8601 UTC. */
export interface WebhookTargetRecord {
  id: string;
  org_id: string;
  name: string;
  url: string;
  events: string[];
  /**
   * null = every repository of the org. A deleted repository's id stays (API §4.2): its events up
   * to `repo.deleted` still match, and ids are never reused, so nothing matches it afterwards.
   */
  repo_ids: string[] | null;
  /** `whsec_…`, sealed with the data directory's SecretBox; never returned after creation. */
  sealed_secret: string;
  created_at: string;
  updated_at: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface DeliveryRecord {
  id: string;
  org_id: string;
  target_id: string;
  event_id: string;
  event_type: string;
  /** The repository of the event (its ordering lane), null for org-level events. */
  repo_id: string | null;
  /** The envelope exactly as sent (and signed). */
  body: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  /** When the next attempt is due; null once the delivery is final. */
  next_attempt_at: string | null;
  redelivery_of: string | null;
  created_at: string;
}

/**
 * The ordering lane of a delivery: deliveries to one target for one repository go out one at a
 * time, in event order (API §11.3).
 */
export function laneOf(d: Pick<DeliveryRecord, 'repo_id'>): string {
  return d.repo_id ?? '-';
}

type Meta = Database<any, Key>;

export function getTarget(meta: Meta, orgId: string, targetId: string): WebhookTargetRecord | undefined {
  return meta.get(K.webhookTarget(orgId, targetId)) as WebhookTargetRecord | undefined;
}

/** Targets of an org in creation order. */
export function* orgTargets(meta: Meta, orgId: string): Generator<WebhookTargetRecord> {
  for (const { value } of meta.getRange(under(['o', orgId, 'wht']))) yield value as WebhookTargetRecord;
}

/** Whether an org has any webhook target (a key lookup; no record is decoded). */
export function orgHasTargets(meta: Meta, orgId: string): boolean {
  for (const _ of meta.getKeys({ ...under(['o', orgId, 'wht']), limit: 1 })) return true;
  return false;
}

/** Deliveries pending (queued, in flight or waiting for a retry), counted from the pending index. */
export function pendingCount(meta: Meta): number {
  return meta.getKeysCount(under(['whq']));
}

/** Whether a repository id names a repository of the org now. */
export function repoExists(meta: Meta, orgId: string): (repoId: string) => boolean {
  return (repoId) => meta.get(K.orgRepo(orgId, repoId)) !== undefined;
}

/**
 * Whether a caller limited to `allowed` repositories may see and manage a target (API §2): only
 * targets whose repositories all lie within its own; `allowed` null means unrestricted. Ids of
 * deleted repositories are nobody's and do not count, but a target must keep one that is the caller's.
 */
export function targetVisible(target: Pick<WebhookTargetRecord, 'repo_ids'>, allowed: readonly string[] | null, exists: (repoId: string) => boolean): boolean {
  if (allowed === null) return true;
  if (target.repo_ids === null) return false;
  const live = target.repo_ids.filter(exists);
  return live.length > 0 && live.every((id) => allowed.includes(id));
}
