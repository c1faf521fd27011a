import { COMMIT_THEN_SYNC } from '../../../storage/commit-flags.js';
import type { Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import { lastOutboxEvent, peekOutboxEvents, takeOutboxEvents } from '../../../storage/outbox.js';
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
/** A shard's events that gave no delivery are taken once it holds this many… */
const DEFER_EVENTS = 256;
/** …or has held one this long (ms). */
const DEFER_MS = 30_000;

/**
 * Events examined that gave no delivery (their org has no target hearing them), left in their
 * outbox for now: taking them is a write on their shard, and in a cluster every shard written is
 * one more append to its log: one per API write when nobody listens. They are taken with the
 * shard's next events that do give a delivery, or once the shard holds DEFER_EVENTS of them or has
 * held one DEFER_MS; being taken matches them again, so what would now be delivered is. Kept in
 * this thread's memory only: after a restart or a move they are examined again.
 */
export class DeferredEvents {
  private readonly shards = new Map<number, { through: string; count: number; since: number }>();

  /** The shard's last event examined and left in its outbox, if any. */
  through(shard: number): string | undefined {
    return this.shards.get(shard)?.through;
  }

  due(shard: number, now: number): boolean {
    const left = this.shards.get(shard);
    return left !== undefined && (left.count >= DEFER_EVENTS || now - left.since >= DEFER_MS);
  }

  leave(shard: number, through: string, count: number, now: number): void {
    const left = this.shards.get(shard);
    if (!left) this.shards.set(shard, { through, count, since: now });
    else {
      left.through = through;
      left.count += count;
    }
  }

  forget(shard: number): void {
    this.shards.delete(shard);
  }
}

export interface FanOutBatch {
  /** The deliveries created, durable, in event order. */
  created: PendingDelivery[];
  /** Whether more events may wait in the outbox. */
  more: boolean;
  /**
   * Cluster mode: settles once the shard log holds the fan-out's commit, and with it every commit
   * of those shards before it (a shard's sets are appended in commit order), events included;
   * with the shards whose sets it refused. Undefined on a single node, or when nothing was taken.
   */
  logged: ReturnType<WriteSink>;
}

/**
 * Where each outbox of `shards` ends now (its last event id), for those with events not examined
 * yet or left long enough (`DeferredEvents`).
 */
export function outboxEnds(storage: Storage, shards: readonly number[], deferred: DeferredEvents, now: number): Map<number, string> {
  const ends = new Map<number, string>();
  for (const shard of shards) {
    const last = lastOutboxEvent(storage.meta, shard);
    if (last === undefined) deferred.forget(shard);
    else if (last !== deferred.through(shard) || deferred.due(shard, now)) ends.set(shard, last);
  }
  return ends;
}

/**
 * Moves one batch of events from the outboxes into delivery records, none written after the ends
 * given (`outboxEnds`, taken before the directory was caught up); null when there is none. A
 * shard whose new events give no delivery is only examined (`DeferredEvents`).
 */
export function fanOutBatch(storage: Storage, directory: OrgDirectory, ends: ReadonlyMap<number, string>, now: number, deferred: DeferredEvents): FanOutBatch | null {
  if (!ends.size) return null;
  const matcher = new TargetMatcher(directory);
  const take = new Map<number, string>();
  let examined = 0;
  for (const [shard, through] of ends) {
    if (examined === DRAIN_BATCH) break;
    if (deferred.due(shard, now)) {
      take.set(shard, through);
      continue;
    }
    const events = peekOutboxEvents(storage.meta, shard, deferred.through(shard), DRAIN_BATCH - examined, through);
    examined += events.length;
    if (events.some((event) => matcher.targetsOf(event).length > 0)) take.set(shard, through);
    else if (events.length > 0) deferred.leave(shard, events.at(-1)!.id, events.length, now);
  }
  let created: PendingDelivery[] = [];
  let logged: ReturnType<WriteSink> = undefined;
  if (take.size) {
    // Synchronous, so the write lock is held only while `fanOut` runs (an asynchronous transaction
    // holds it while this thread is scheduled to run the callback), and on disk when it returns:
    // a delivery is sent only once its record is durable, otherwise a crash could bring the event
    // back to the outbox and send it again under a new delivery id.
    logged = commitWrites(storage, () => void (created = fanOut(storage, matcher, take, now)), COMMIT_THEN_SYNC);
    for (const shard of take.keys()) deferred.forget(shard);
  }
  // Events written after the ends (or past the batch) wait for the next batch, not the next poll.
  const more = [...ends.keys()].some((shard) => {
    const last = lastOutboxEvent(storage.meta, shard);
    return last !== undefined && last !== deferred.through(shard);
  });
  return { created, more, logged };
}

/** Runs inside the drain's write transaction: every read here sees the latest commit. */
function fanOut(storage: Storage, matcher: TargetMatcher, ends: ReadonlyMap<number, string>, now: number): PendingDelivery[] {
  const { meta } = storage;
  const events: EventEnvelope[] = [];
  for (const [shard, through] of ends) {
    if (events.length === DRAIN_BATCH) break;
    events.push(...takeOutboxEvents(meta, shard, DRAIN_BATCH - events.length, through));
  }
  const created: PendingDelivery[] = [];
  const nowIso = new Date(now).toISOString();
  for (const event of events) {
    const orgId = event.organization.id;
    const repoId = event.repository?.id ?? null;
    let body: string | null = null;
    let bytes: Buffer | null = null;
    for (const target of matcher.targetsOf(event)) {
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
  return created;
}

/** The targets an event goes to, each org's targets read from the directory once per batch. */
class TargetMatcher {
  private readonly byOrg = new Map<string, Subscriber[]>();

  constructor(private readonly directory: OrgDirectory) {}

  targetsOf(event: EventEnvelope): WebhookTargetRecord[] {
    const orgId = event.organization.id;
    let subscribers = this.byOrg.get(orgId);
    if (!subscribers) this.byOrg.set(orgId, (subscribers = this.directory.targets(orgId).map(subscriber)));
    const repoId = event.repository?.id ?? null;
    const out: WebhookTargetRecord[] = [];
    for (const sub of subscribers) {
      // A target hears of what happens from its creation on, not of events that were still
      // waiting in the outbox when it was created.
      if (matches(sub, event.type, repoId) && event.occurred_at >= sub.record.created_at) out.push(sub.record);
    }
    return out;
  }
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
