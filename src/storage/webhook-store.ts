import type { Database, Key } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';
import { newestFirst } from './newest-first.js';

/**
 * The webhook records kept in LMDB (layout in `storage/keys.ts`). Timestamps are ISO-8601 UTC.
 * Targets are kept by the org directory (org-directory.ts); deliveries and their queue here.
 */
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

type Meta = Database<unknown, Key>;

/** Deliveries pending (queued, in flight or waiting for a retry), counted from the pending index. */
export function pendingCount(meta: Meta): number {
  return meta.getKeysCount(Ranges.webhookPending());
}

/**
 * Removes what this node keeps of a target besides its record (which is the org directory's):
 * its delivery log and its pending index entries.
 */
export function removeDeliveries(meta: Meta, orgId: string, targetId: string): void {
  // Keys are collected first: a range is not iterated while it is being deleted.
  for (const key of [...meta.getKeys(Ranges.webhookDeliveries(orgId, targetId)), ...meta.getKeys(Ranges.webhookPendingOf(targetId))]) meta.removeSync(key);
}

export function getDelivery(meta: Meta, orgId: string, targetId: string, deliveryId: string): DeliveryRecord | undefined {
  return meta.get(K.webhookDelivery(orgId, targetId, deliveryId)) as DeliveryRecord | undefined;
}

/** Stores a new pending delivery and queues it in its target's lane. */
export function enqueueDelivery(meta: Meta, record: DeliveryRecord): void {
  meta.putSync(K.webhookDelivery(record.org_id, record.target_id, record.id), record);
  meta.putSync(K.webhookPending(record.target_id, laneOf(record), record.id), record.org_id);
}

/**
 * Stores what an attempt left of a delivery, unless its target was deleted meanwhile (its index
 * entry went with it); a final one leaves the queue. Returns whether it was stored.
 */
export function saveDeliveryAttempt(meta: Meta, record: DeliveryRecord): boolean {
  const pendingKey = K.webhookPending(record.target_id, laneOf(record), record.id);
  if (!meta.doesExist(pendingKey)) return false;
  meta.putSync(K.webhookDelivery(record.org_id, record.target_id, record.id), record);
  if (record.status !== 'pending') meta.removeSync(pendingKey);
  return true;
}

/** Every (target, lane) with pending deliveries, once each. */
export function* pendingLanes(meta: Meta): Generator<{ targetId: string; lane: string }> {
  let last = '';
  for (const key of meta.getKeys(Ranges.webhookPending())) {
    const [, targetId, lane] = key as string[];
    if (`${targetId}\0${lane}` === last) continue;
    last = `${targetId}\0${lane}`;
    yield { targetId: targetId!, lane: lane! };
  }
}

/** The pending index of one lane, in order: each delivery id with its org. */
export function* laneEntries(meta: Meta, targetId: string, lane: string): Generator<{ orgId: string; deliveryId: string }> {
  for (const { key, value } of meta.getRange(Ranges.webhookLane(targetId, lane))) yield { orgId: value as string, deliveryId: lastPart(key) };
}

/** Removes index entries of deliveries that are no longer pending. */
export function dropLaneEntries(meta: Meta, targetId: string, lane: string, deliveryIds: readonly string[]): void {
  for (const id of deliveryIds) meta.removeSync(K.webhookPending(targetId, lane, id));
}

/** A target's delivery log, newest first, strictly before `before` when given. */
export function* deliveriesNewestFirst(meta: Meta, orgId: string, targetId: string, before?: string): Generator<DeliveryRecord> {
  for (const { value } of newestFirst(meta, Ranges.webhookDeliveries(orgId, targetId), before ? K.webhookDelivery(orgId, targetId, before) : undefined)) yield value as DeliveryRecord;
}

/** A target's delivery log, oldest first (delivery ids sort by creation time). */
export function* deliveryLog(meta: Meta, orgId: string, targetId: string): Generator<DeliveryRecord> {
  for (const { value } of meta.getRange(Ranges.webhookDeliveries(orgId, targetId))) yield value as DeliveryRecord;
}

/** Removes the delivery unless it is pending again; returns whether it was removed. */
export function removeFinishedDelivery(meta: Meta, orgId: string, targetId: string, deliveryId: string): boolean {
  const key = K.webhookDelivery(orgId, targetId, deliveryId);
  const current = meta.get(key) as DeliveryRecord | undefined;
  if (!current || current.status === 'pending') return false;
  meta.removeSync(key);
  return true;
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
