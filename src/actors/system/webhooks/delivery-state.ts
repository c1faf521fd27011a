import { log } from '../../../log.js';
import type { Storage } from '../../../storage/database.js';
import { K, under } from '../../../storage/keys.js';
import type { Clock } from './clock.js';
import type { LaneHead } from './lane-scheduler.js';
import { getTarget, laneOf, type DeliveryRecord, type WebhookTargetRecord } from './records.js';

/**
 * Delivery state as the webhook actor reads and writes it: the delivery records of each target's
 * log and the pending index ['whq', target, lane, delivery] that is the actor's durable queue.
 * Every change is written to LMDB, so a restart resumes where the last run stopped.
 */
export class DeliveryState {
  /** Deliveries answered for good whose final state is still being written: not to be sent again. */
  private readonly finishing = new Set<string>();
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
  ) {}

  /** Every (target, lane) with pending deliveries, once each, as a previous run left them. */
  *pendingLanes(): Generator<{ targetId: string; lane: string }> {
    let last = '';
    for (const key of this.storage.meta.getKeys(under(['whq']))) {
      const [, targetId, lane] = key as string[];
      if (`${targetId}\0${lane}` === last) continue;
      last = `${targetId}\0${lane}`;
      yield { targetId: targetId!, lane: lane! };
    }
  }

  /** The lane of a delivery that is pending (one another thread created), or null. */
  pendingLane(orgId: string, targetId: string, deliveryId: string): string | null {
    const record = this.storage.meta.get(K.webhookDelivery(orgId, targetId, deliveryId)) as DeliveryRecord | undefined;
    return record?.status === 'pending' ? laneOf(record) : null;
  }

  /** The lane's first pending delivery, with the time its next attempt is due. */
  firstPending(targetId: string, lane: string): LaneHead | null {
    const { meta } = this.storage;
    for (const { key, value } of meta.getRange(under(['whq', targetId, lane]))) {
      const id = (key as string[])[3]!;
      if (this.finishing.has(id)) continue; // answered; its final state is being written
      const orgId = value as string;
      const record = meta.get(K.webhookDelivery(orgId, targetId, id)) as DeliveryRecord | undefined;
      const dueAt = record?.next_attempt_at ? Date.parse(record.next_attempt_at) : this.clock.now();
      return { id, orgId, targetId, lane, dueAt };
    }
    return null;
  }

  /**
   * The delivery and its target when it is still to be sent. Otherwise its index entry is stale
   * (a deleted target takes its deliveries with it) and is removed: null.
   */
  async load(head: LaneHead): Promise<{ target: WebhookTargetRecord; record: DeliveryRecord } | null> {
    const { meta, root } = this.storage;
    const target = getTarget(meta, head.orgId, head.targetId);
    const record = meta.get(K.webhookDelivery(head.orgId, head.targetId, head.id)) as DeliveryRecord | undefined;
    if (target && record?.status === 'pending') return { target, record };
    await root.transaction(() => meta.removeSync(K.webhookPending(head.targetId, head.lane, head.id)));
    return null;
  }

  /** Saves an attempt after which the delivery stays pending; false when it is no longer (deleted meanwhile). */
  reschedule(head: LaneHead, updated: DeliveryRecord): Promise<boolean> {
    return this.persist(head, updated);
  }

  /**
   * Saves a delivery's final state. The lane moves on without waiting for this commit: the
   * receiver has answered, and a crash before the commit only means the same delivery id is sent
   * once more after the restart.
   */
  finish(head: LaneHead, updated: DeliveryRecord): void {
    this.finishing.add(head.id);
    const write = this.persist(head, updated)
      .then(
        () => undefined,
        (err: unknown) => log.error('webhook delivery state not saved', { err, delivery_id: head.id }),
      )
      .finally(() => this.finishing.delete(head.id));
    this.writes.add(write);
    void write.finally(() => this.writes.delete(write));
  }

  /** Resolves once every final state handed to `finish` has been written. */
  async flushed(): Promise<void> {
    await Promise.allSettled([...this.writes]);
  }

  private persist(head: LaneHead, updated: DeliveryRecord): Promise<boolean> {
    const { meta, root } = this.storage;
    const key = K.webhookDelivery(head.orgId, head.targetId, head.id);
    return root.transaction(() => {
      const current = meta.get(key) as DeliveryRecord | undefined;
      if (current?.status !== 'pending') return false;
      meta.putSync(key, updated);
      if (updated.status !== 'pending') meta.removeSync(K.webhookPending(head.targetId, head.lane, head.id));
      return true;
    });
  }
}
