import { COMMIT_THEN_SYNC, type Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import { lastOutboxEvent, takeOutboxEvents } from '../../../storage/outbox.js';
import { newId } from '../../../storage/ids.js';
import type { EventEnvelope } from '../../../storage/records.js';
import { deliveryShard } from '../../../storage/shards.js';
import { commitWrites } from '../../../storage/write-recorder.js';
import type { WriteSink } from '../../../storage/write-set.js';
import type { PendingDelivery } from './delivery-state.js';
import { enqueueDelivery, laneOf, type DeliveryRecord, type WebhookTargetRecord } from '../../../storage/webhook-store.js';

/**
 * Outbox fan-out: events leave a shard's outbox and become one delivery record per matching
 * target, with its entry in the pending index, in one transaction and on that same shard (the
 * delivery's shard is its event's: `deliveryShard`). A transaction drains every shard given that
 * has events, so that events spread over many shards still cost one commit (one flush), not one
 * each; what each shard's keys record stays that shard's own.
 */

/** Events taken from the outboxes per transaction: keeps the write lock short. */
const DRAIN_BATCH = 500;

export interface FanOutBatch {
  /** The deliveries created, durable, in event order. */
  created: PendingDelivery[];
  /** Whether more events may wait in the outbox. */
  more: boolean;
  /**
   * Cluster mode: settles once the shard log holds the fan-out's commit, and with it every commit
   * of those shards before it (a shard's sets are appended in commit order), events included;
   * with the shards whose sets it refused. Undefined on a single node.
   */
  logged: ReturnType<WriteSink>;
}

/** Where each outbox of `shards` that holds events ends now: the last event id, by shard. */
export function outboxEnds(storage: Storage, shards: readonly number[]): Map<number, string> {
  const ends = new Map<number, string>();
  for (const shard of shards) {
    const last = lastOutboxEvent(storage.meta, shard);
    if (last !== undefined) ends.set(shard, last);
  }
  return ends;
}

/**
 * Moves one batch of events from the outboxes into delivery records, none written after the ends
 * given (`outboxEnds`, taken before the directory was caught up); null when there is none.
 */
export function fanOutBatch(storage: Storage, directory: OrgDirectory, ends: ReadonlyMap<number, string>, now: number): FanOutBatch | null {
  if (!ends.size) return null;
  // Synchronous, so the write lock is held only while `fanOut` runs (an asynchronous transaction
  // holds it while this thread is scheduled to run the callback), and on disk when it returns:
  // a delivery is sent only once its record is durable, otherwise a crash could bring the event
  // back to the outbox and send it again under a new delivery id.
  let made!: { created: PendingDelivery[]; more: boolean };
  const logged = commitWrites(storage, () => void (made = fanOut(storage, directory, ends, now)), COMMIT_THEN_SYNC);
  return { created: made.created, more: made.more, logged };
}

/** Runs inside the drain's write transaction: every read here sees the latest commit. */
function fanOut(storage: Storage, directory: OrgDirectory, ends: ReadonlyMap<number, string>, now: number): { created: PendingDelivery[]; more: boolean } {
  const { meta } = storage;
  const events: EventEnvelope[] = [];
  for (const [shard, through] of ends) {
    if (events.length === DRAIN_BATCH) break;
    events.push(...takeOutboxEvents(meta, shard, DRAIN_BATCH - events.length, through));
  }
  const targetsByOrg = new Map<string, Subscriber[]>();
  const created: PendingDelivery[] = [];
  const nowIso = new Date(now).toISOString();
  for (const event of events) {
    const orgId = event.organization.id;
    let targets = targetsByOrg.get(orgId);
    if (!targets) targetsByOrg.set(orgId, (targets = directory.targets(orgId).map(subscriber)));
    const repoId = event.repository?.id ?? null;
    let body: string | null = null;
    let bytes: Buffer | null = null;
    for (const sub of targets) {
      if (!matches(sub, event.type, repoId)) continue;
      const target = sub.record;
      // A target hears of what happens from its creation on, not of events that were still
      // waiting in the outbox when it was created.
      if (event.occurred_at < target.created_at) continue;
      // The envelope exactly as its producer wrote it; no compiled serializer fits every `data`.
      body ??= JSON.stringify(event);
      bytes ??= Buffer.from(body);
      const record: DeliveryRecord = {
        id: newId('dlv'),
        org_id: orgId,
        target_id: target.id,
        event_id: event.id,
        event_type: event.type,
        repo_id: repoId,
        body,
        status: 'pending',
        attempts: 0,
        last_status_code: null,
        last_error: null,
        next_attempt_at: nowIso,
        redelivery_of: null,
        created_at: nowIso,
      };
      enqueueDelivery(meta, record);
      created.push({ orgId, targetId: target.id, lane: laneOf(record), shard: deliveryShard(record), record, body: bytes, dueAt: now });
    }
  }
  // Events written after the ends (or past the batch) wait for the next batch, not the next poll.
  return { created, more: [...ends.keys()].some((shard) => lastOutboxEvent(meta, shard) !== undefined) };
}

/** A target as the fan-out matches it: sets, since a target may list thousands of repositories. */
interface Subscriber {
  record: WebhookTargetRecord;
  repos: Set<string> | null;
}

function subscriber(record: WebhookTargetRecord): Subscriber {
  return { record, repos: record.repo_ids && new Set(record.repo_ids) };
}

/** Whether an event goes to a target: a subscribed kind, and an org-wide target or one of its repositories. */
function matches(sub: Subscriber, type: string, repoId: string | null): boolean {
  if (!sub.record.events.includes(type)) return false;
  if (sub.repos === null) return true;
  return repoId !== null && sub.repos.has(repoId);
}
