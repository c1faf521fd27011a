import type { Database, Key } from 'lmdb';
import { SHARD_COUNT } from '../actors/shard-map.js';
import { K, lastPart, ORG_LANE, Ranges, type KeyRange } from './keys.js';
import { mergeOrdered } from './merge-ordered.js';
import type { ListEntry } from './newest-first.js';
import { deliveryRecordKeys } from './read/gathered-keys.js';
import type { RecordReader } from './read/record-cache.js';
import { deliveryShard } from './shards.js';

/**
 * The webhook records kept in LMDB (layout in `storage/keys.ts`). Timestamps are ISO-8601 UTC.
 * Targets are kept by the org directory (org-directory.ts); deliveries and their queue here, each
 * on the shard of the actor that created the delivery (`deliveryShard`): only that shard's owner
 * sends it and writes its outcome.
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
  return d.repo_id ?? ORG_LANE;
}

type Meta = Database<unknown, Key>;

/** Deliveries pending (queued, in flight or waiting for a retry) on `shards`, counted from the pending index. */
export function pendingCount(meta: Meta, shards: readonly number[]): number {
  let n = 0;
  for (const shard of shards) n += meta.getKeysCount(Ranges.webhookPending(shard));
  return n;
}

/** Whether any delivery of the target is pending, on any shard. */
export function hasPendingDeliveries(meta: Meta, targetId: string): boolean {
  for (let shard = 0; shard < SHARD_COUNT; shard++) {
    for (const _ of meta.getKeys({ ...Ranges.webhookPendingOf(shard, targetId), limit: 1 })) return true;
  }
  return false;
}

/**
 * Removes what a shard keeps of a deleted target besides its record (which is the org
 * directory's): its delivery records and its pending index entries there.
 */
export function removeTargetDeliveries(meta: Meta, shard: number, targetId: string): number {
  // Keys are collected first: a range is not iterated while it is being deleted.
  const keys = [...meta.getKeys(Ranges.webhookDeliveries(shard, targetId)), ...meta.getKeys(Ranges.webhookPendingOf(shard, targetId))];
  for (const key of keys) meta.removeSync(key);
  return keys.length;
}

export function getDelivery(meta: Meta, shard: number, targetId: string, deliveryId: string): DeliveryRecord | undefined {
  return meta.get(K.webhookDelivery(shard, targetId, deliveryId)) as DeliveryRecord | undefined;
}

/**
 * A delivery of the target found by its id alone, on whichever shard keeps it (its id does not
 * say which): read from `reader`, this node's LMDB or, in a cluster, what the shards' owners hold.
 */
export function findDelivery(reader: RecordReader, targetId: string, deliveryId: string): DeliveryRecord | undefined {
  for (const key of deliveryRecordKeys(targetId, deliveryId)) {
    const record = reader.get(key) as DeliveryRecord | undefined;
    if (record) return record;
  }
  return undefined;
}

/** Stores a new pending delivery and queues it in its target's lane, on the shard of the actor creating it. */
export function enqueueDelivery(meta: Meta, record: DeliveryRecord): void {
  const shard = deliveryShard(record);
  meta.putSync(K.webhookDelivery(shard, record.target_id, record.id), record);
  meta.putSync(K.webhookPending(shard, record.target_id, laneOf(record), record.id), record.org_id);
}

/**
 * Stores what an attempt left of a delivery, unless its target was deleted meanwhile (its index
 * entry went with it); a final one leaves the queue. Returns whether it was stored.
 */
export function saveDeliveryAttempt(meta: Meta, record: DeliveryRecord): boolean {
  const shard = deliveryShard(record);
  const pendingKey = K.webhookPending(shard, record.target_id, laneOf(record), record.id);
  if (!meta.doesExist(pendingKey)) return false;
  meta.putSync(K.webhookDelivery(shard, record.target_id, record.id), record);
  if (record.status !== 'pending') meta.removeSync(pendingKey);
  return true;
}

/** Every (target, lane) with pending deliveries on a shard, once each, with the target's org. */
export function* pendingLanes(meta: Meta, shard: number): Generator<{ orgId: string; targetId: string; lane: string }> {
  let last = '';
  for (const { key, value } of meta.getRange(Ranges.webhookPending(shard))) {
    const [, , targetId, lane] = key as [number, string, string, string];
    if (`${targetId}\0${lane}` === last) continue;
    last = `${targetId}\0${lane}`;
    yield { orgId: value as string, targetId, lane };
  }
}

/** The pending index of one lane on a shard, in order: each delivery id with its org. */
export function* laneEntries(meta: Meta, shard: number, targetId: string, lane: string): Generator<{ orgId: string; deliveryId: string }> {
  for (const { key, value } of meta.getRange(Ranges.webhookLane(shard, targetId, lane))) yield { orgId: value as string, deliveryId: lastPart(key) };
}

/** Removes index entries of deliveries that are no longer pending. */
export function dropLaneEntries(meta: Meta, shard: number, targetId: string, lane: string, deliveryIds: readonly string[]): void {
  for (const id of deliveryIds) meta.removeSync(K.webhookPending(shard, targetId, lane, id));
}

/**
 * A target's delivery log as lists kept per shard, one per shard (records under their ids, which
 * sort by creation time): read newest first across them with `newestOf`.
 */
export const deliveryLists = (targetId: string): KeyRange[] => Array.from({ length: SHARD_COUNT }, (_, shard) => Ranges.webhookDeliveries(shard, targetId));

export const deliveryOfEntry = ({ value }: ListEntry): DeliveryRecord => value as DeliveryRecord;

/** A target's delivery records on one shard, oldest first (delivery ids sort by creation time). */
export function* shardDeliveryLog(meta: Meta, shard: number, targetId: string): Generator<DeliveryRecord> {
  for (const { value } of meta.getRange(Ranges.webhookDeliveries(shard, targetId))) yield value as DeliveryRecord;
}

/** A target's delivery log on every shard, oldest first. */
export function deliveryLog(meta: Meta, targetId: string): Generator<DeliveryRecord> {
  return mergeOrdered(
    Array.from({ length: SHARD_COUNT }, (_, shard) => shardDeliveryLog(meta, shard, targetId)),
    (d) => d.id,
  );
}

/**
 * Every target with delivery records or pending entries on a shard, once each, with its org:
 * what the shard's owner checks against the org directory to drop what deleted targets left.
 */
export function* shardDeliveryTargets(meta: Meta, shard: number): Generator<{ orgId: string; targetId: string }> {
  const seen = new Set<string>();
  const kinds = [
    { all: Ranges.shardWebhookDeliveries(shard), ofTarget: Ranges.webhookDeliveries, orgOf: (v: unknown) => (v as DeliveryRecord).org_id },
    { all: Ranges.webhookPending(shard), ofTarget: Ranges.webhookPendingOf, orgOf: (v: unknown) => v as string },
  ];
  for (const { all, ofTarget, orgOf } of kinds) {
    let start = all.start;
    for (;;) {
      let first: { key: Key; value: unknown } | undefined;
      for (const entry of meta.getRange({ start, end: all.end, limit: 1 })) first = entry;
      if (!first) break;
      const targetId = (first.key as string[])[2]!;
      if (!seen.has(targetId)) {
        seen.add(targetId);
        yield { orgId: orgOf(first.value), targetId };
      }
      // One read per target: the next starts past the whole of this target's range.
      start = ofTarget(shard, targetId).end;
    }
  }
}

/** Removes the delivery unless it is pending again; returns whether it was removed. */
export function removeFinishedDelivery(meta: Meta, shard: number, targetId: string, deliveryId: string): boolean {
  const key = K.webhookDelivery(shard, targetId, deliveryId);
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
