import { log } from '../../../log.js';
import type { Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import {
  dropLaneEntries,
  getDelivery,
  laneEntries,
  laneOf,
  pendingLanes,
  saveDeliveryAttempt,
  type DeliveryRecord,
  type WebhookTargetRecord,
} from '../../../storage/webhook-store.js';

/**
 * Delivery state as the webhook actor reads and writes it: the delivery records of each target's
 * log and the pending index ['whq', target, lane, delivery] that is the actor's durable queue.
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
  /** The record as it stands after the last attempt (written, or queued to be). */
  record: DeliveryRecord;
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
  ) {}

  /** Every (target, lane) with pending deliveries, once each, as a previous run left them. */
  pendingLanes(): Generator<{ targetId: string; lane: string }> {
    return pendingLanes(this.storage.meta);
  }

  /** The lane of a delivery that is pending (one another thread created), or null. */
  pendingLane(orgId: string, targetId: string, deliveryId: string): string | null {
    const record = getDelivery(this.storage.meta, orgId, targetId, deliveryId);
    return record?.status === 'pending' ? laneOf(record) : null;
  }

  /**
   * Up to `limit` of the lane's pending deliveries from the index, in order, skipping those
   * whose final state is being written. An index entry without a pending record is stale and
   * is removed.
   */
  readLane(targetId: string, lane: string, limit: number): PendingDelivery[] {
    const { meta, root } = this.storage;
    const found: PendingDelivery[] = [];
    const stale: string[] = [];
    for (const { orgId, deliveryId: id } of laneEntries(meta, targetId, lane)) {
      if (this.finishing.has(id)) continue;
      const record = getDelivery(meta, orgId, targetId, id);
      if (record?.status !== 'pending') {
        stale.push(id);
        continue;
      }
      found.push({ orgId, targetId, lane, record, dueAt: record.next_attempt_at ? Date.parse(record.next_attempt_at) : 0 });
      if (found.length === limit) break;
    }
    if (stale.length) {
      root.transaction(() => dropLaneEntries(meta, targetId, lane, stale)).catch((err: unknown) => log.error('webhook index cleanup failed', { err }));
    }
    return found;
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

  /** Queues a delivery's record, as its last attempt left it, for the next batch. */
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
          for (const { record } of batch) saveDeliveryAttempt(meta, record);
        });
      } catch (err) {
        log.error('webhook delivery state not saved', { err, deliveries: batch.length });
      }
      for (const { record } of batch) if (record.status !== 'pending') this.finishing.delete(record.id);
    }
    this.writing = null;
  }
}
