import { log } from '../../../log.js';
import type { Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import { shardOfLane } from '../../../storage/keys.js';
import { mergeOrdered } from '../../../storage/merge-ordered.js';
import { orgShard } from '../../../storage/shards.js';
import {
  dropLaneEntries,
  getDelivery,
  laneEntries,
  laneOf,
  pendingLanes,
  removeTargetDeliveries,
  saveDeliveryAttempt,
  shardDeliveryTargets,
  type DeliveryRecord,
  type WebhookTargetRecord,
} from '../../../storage/webhook-store.js';
import type { ShardOwnership } from '../shard-ownership.js';

/**
 * Delivery state as the webhook actor reads and writes it: the delivery records of each target's
 * log and the pending index [shard, 'whq', target, lane, delivery] that is the actor's durable
 * queue, on the shards this node owns only: what it writes of another shard would be that shard's
 * owner's to write (a shard lost while an attempt was under way leaves its outcome to the new
 * owner, which sends the delivery again under the same id).
 *
 * A lane's deliveries are on at most two shards: its events' (its repository's, the org's for
 * org events: every delivery fanned out of them) and the org's (redeliveries, which the org's
 * actor creates). The lane reads both, merged in creation order, where this node owns them.
 *
 * What attempts change is written in batches, one LMDB transaction for all that finished since
 * the last one (at most one in flight), never read back first. A delivery's record is durable
 * before its first attempt (the fan-out commits it); a crash before its outcome is written only
 * means it is sent again after the restart, under the same delivery id (API §11.3).
 */
export interface PendingDelivery {
  orgId: string;
  targetId: string;
  lane: string;
  /** The shard that keeps the delivery (`deliveryShard`). */
  shard: number;
  /** The record as it stands after the last attempt (written, or queued to be). */
  record: DeliveryRecord;
  /**
   * The record's body as the bytes signed and sent, made once: by the fan-out for all the targets
   * of an event, or when the record is read back. A string body would be encoded again by the
   * HMAC and by the HTTP client at every attempt.
   */
  body: Buffer;
  /** When the next attempt is due. */
  dueAt: number;
}

export class DeliveryState {
  /** Deliveries whose final state is queued or being written: done, although still in the index. */
  private readonly finishing = new Set<string>();
  private queued: PendingDelivery[] = [];
  private writing: Promise<void> | null = null;
  /** Targets as read at `targetsVersion` of the directory (null: deleted). */
  private readonly targets = new Map<string, WebhookTargetRecord | null>();
  private targetsVersion = -1;

  constructor(
    private readonly storage: Storage,
    private readonly directory: OrgDirectory,
    private readonly ownership: ShardOwnership,
  ) {}

  /** Every (target, lane) with pending deliveries on `shards`, as a previous run or owner left them. */
  *pendingLanes(shards: readonly number[]): Generator<{ orgId: string; targetId: string; lane: string }> {
    for (const shard of shards) yield* pendingLanes(this.storage.meta, shard);
  }

  /**
   * The lane of a redelivery of the org that is pending here, or null. The org's actor created it,
   * so it is on the org's shard (`deliveryShard`), if this node owns that.
   */
  pendingRedelivery(orgId: string, targetId: string, deliveryId: string): string | null {
    const shard = orgShard(orgId);
    if (!this.ownership.owns(shard)) return null;
    const record = getDelivery(this.storage.meta, shard, targetId, deliveryId);
    return record?.status === 'pending' ? laneOf(record) : null;
  }

  /**
   * Up to `limit` of the lane's pending deliveries from the index, in order, skipping those
   * whose final state is being written. An index entry without a pending record is stale and
   * is removed.
   */
  readLane(orgId: string, targetId: string, lane: string, limit: number): PendingDelivery[] {
    const { meta, root } = this.storage;
    const found: PendingDelivery[] = [];
    const stale: Array<{ shard: number; id: string }> = [];
    const shards = [...new Set([shardOfLane(orgId, lane), orgShard(orgId)])].filter((s) => this.ownership.owns(s));
    const entries = shards.map((shard) => (function* () {
      for (const entry of laneEntries(meta, shard, targetId, lane)) yield { shard, ...entry };
    })());
    for (const { shard, deliveryId: id } of mergeOrdered(entries, (e) => e.deliveryId)) {
      if (this.finishing.has(id)) continue;
      const record = getDelivery(meta, shard, targetId, id);
      if (record?.status !== 'pending') {
        stale.push({ shard, id });
        continue;
      }
      found.push({ orgId, targetId, lane, shard, record, body: Buffer.from(record.body), dueAt: record.next_attempt_at ? Date.parse(record.next_attempt_at) : 0 });
      if (found.length === limit) break;
    }
    if (stale.length) {
      root
        .transaction(() => {
          for (const { shard, id } of stale) if (this.ownership.owns(shard)) dropLaneEntries(meta, shard, targetId, lane, [id]);
        })
        .catch((err: unknown) => log.error('webhook index cleanup failed', { err }));
    }
    return found;
  }

  /**
   * Drops what deleted targets left on an owned shard: their delivery records and pending
   * entries (deleting a target removes its record only: each shard's owner removes the rest).
   * Returns how many entries were removed. Targets are looked up through `target`, decoded once
   * for all the shards, not once per shard they have deliveries on.
   */
  async dropDeletedTargets(shard: number): Promise<number> {
    const { meta, root } = this.storage;
    const gone = [...shardDeliveryTargets(meta, shard)].filter(({ orgId, targetId }) => !this.target(orgId, targetId));
    if (!gone.length) return 0;
    return root.transaction(() => (this.ownership.owns(shard) ? gone.reduce((n, { targetId }) => n + removeTargetDeliveries(meta, shard, targetId), 0) : 0));
  }

  /**
   * The target as it stands now, or undefined once it is deleted (its deliveries went with it).
   * Read again whenever the directory's version moves, so a new URL or secret applies at once;
   * a target may list thousands of repositories, too many to decode for every attempt.
   */
  target(orgId: string, targetId: string): WebhookTargetRecord | undefined {
    const version = this.directory.version();
    if (version !== this.targetsVersion) {
      this.targets.clear();
      this.targetsVersion = version;
    }
    let record = this.targets.get(targetId);
    if (record === undefined) this.targets.set(targetId, (record = this.directory.target(orgId, targetId) ?? null));
    return record ?? undefined;
  }

  /** Queues a delivery's record, as its last attempt left it, for the next batch (if its shard is still owned then). */
  save(delivery: PendingDelivery): void {
    if (delivery.record.status !== 'pending') this.finishing.add(delivery.record.id);
    this.queued.push(delivery);
    if (!this.writing) this.writing = this.write();
  }

  /** Resolves once everything queued so far has been written. */
  async flushed(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Writes batches until none is queued: one transaction each, the next gathering meanwhile. */
  private async write(): Promise<void> {
    const { meta, root } = this.storage;
    // Called with a batch queued, so the loop awaits before `writing` is cleared below.
    while (this.queued.length) {
      const batch = this.queued;
      this.queued = [];
      try {
        await root.transaction(() => {
          for (const { shard, record } of batch) if (this.ownership.owns(shard)) saveDeliveryAttempt(meta, record);
        });
      } catch (err) {
        log.error('webhook delivery state not saved', { err, deliveries: batch.length });
      }
      for (const { record } of batch) if (record.status !== 'pending') this.finishing.delete(record.id);
    }
    this.writing = null;
  }
}
