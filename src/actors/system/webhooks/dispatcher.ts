import { setImmediate as nextTurn } from 'node:timers/promises';
import { log } from '../../../log.js';
import type { Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import type { SecretBox } from '../../../storage/secret-box.js';
import { systemClock, type Clock } from './clock.js';
import { DeliveryState, type PendingDelivery } from './delivery-state.js';
import { HttpDelivery } from './http-delivery.js';
import { LaneScheduler } from './lane-scheduler.js';
import { pruneDeliveryLog } from './log-pruning.js';
import { fanOutBatch } from './outbox-fan-out.js';
import { afterAttempt } from './retry-policy.js';

/**
 * The webhook actor (API §11.3). It runs in its own thread (`worker.ts`), never inside a
 * repository's mailbox, and wires its parts together:
 *
 *   outbox ──fan-out (outbox-fan-out.ts)──▶ delivery records and pending index, durable
 *          └──▶ the same deliveries, in memory, to their lanes (lane-scheduler.ts; the pending
 *               index when a lane holds too many, after a restart, for a redelivery)
 *   lane head ──▶ signed POST (http-delivery.ts) ──▶ verdict, retry time (retry-policy.ts)
 *             ──▶ outcomes written in batches (delivery-state.ts)
 *
 * and prunes the delivery log (log-pruning.ts) once an hour.
 */
export interface DispatcherOptions {
  storage: Storage;
  /** Where the webhook targets are read. */
  directory: OrgDirectory;
  secrets: SecretBox;
  brand: string;
  allowPrivate: boolean;
  retryBaseMs: number;
  /** How often the outbox is checked while idle. */
  pollMs: number;
  concurrencyPerTarget: number;
  /** A delivery attempt that has no answer within this is a transient failure. */
  timeoutMs: number;
  /** Finished deliveries are kept in the log this long. */
  retentionMs: number;
  /** The system clock unless a test moves time by hand. */
  clock?: Clock;
}

const FIRST_PRUNE_MS = 1000;
const PRUNE_EVERY_MS = 3600_000;

export class WebhookDispatcher {
  private readonly clock: Clock;
  private readonly state: DeliveryState;
  private readonly http: HttpDelivery;
  private readonly lanes: LaneScheduler;
  private cancelPoll: (() => void) | null = null;
  private cancelPrune: (() => void) | null = null;
  private polling: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly opts: DispatcherOptions) {
    this.clock = opts.clock ?? systemClock;
    this.state = new DeliveryState(opts.storage, opts.directory);
    this.http = new HttpDelivery({ secrets: opts.secrets, brand: opts.brand, allowPrivate: opts.allowPrivate, timeoutMs: opts.timeoutMs, clock: this.clock });
    this.lanes = new LaneScheduler({
      clock: this.clock,
      concurrencyPerTarget: opts.concurrencyPerTarget,
      readLane: (targetId, lane, limit) => this.state.readLane(targetId, lane, limit),
      attempt: (delivery) => this.attempt(delivery),
    });
  }

  start(): void {
    this.resume();
    this.wake();
    this.cancelPrune = this.clock.schedule(FIRST_PRUNE_MS, () => void this.pruneLoop());
  }

  /** Checks the outbox now instead of at the next poll. */
  wake(): void {
    if (this.stopped || this.polling) return;
    this.cancelPoll?.();
    this.cancelPoll = null;
    this.polling = this.poll().finally(() => {
      this.polling = null;
      if (!this.stopped) this.cancelPoll = this.clock.schedule(this.opts.pollMs, () => this.wake());
    });
  }

  /** Picks up a delivery another thread created (a redelivery) without waiting for a restart. */
  adopt(orgId: string, targetId: string, deliveryId: string): void {
    const lane = this.state.pendingLane(orgId, targetId, deliveryId);
    if (lane !== null) this.lanes.resume(targetId, lane);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelPoll?.();
    this.cancelPrune?.();
    // In-flight attempts are cut short and left pending: the next start sends them again, with
    // the same delivery id.
    this.http.shutdown();
    await this.polling;
    await this.lanes.stop();
    await this.state.flushed();
    await this.http.close();
  }

  /** Takes up every lane with pending deliveries from a previous run. */
  private resume(): void {
    let lanes = 0;
    for (const { targetId, lane } of this.state.pendingLanes()) {
      lanes++;
      this.lanes.resume(targetId, lane);
    }
    if (lanes) log.info('webhook deliveries resumed', { lanes });
  }

  private async poll(): Promise<void> {
    try {
      // One batch per turn of the event loop, so deliveries go on during a long drain.
      while (!this.stopped && this.drainOnce()) await nextTurn();
    } catch (err) {
      log.error('webhook outbox drain failed', { err });
    }
  }

  /** Fans out one batch of the outbox; true when more may wait. */
  private drainOnce(): boolean {
    const batch = fanOutBatch(this.opts.storage, this.opts.directory, this.clock.now());
    if (!batch) return false;
    for (const d of batch.created) this.lanes.add(d);
    return batch.more;
  }

  /** One attempt of a lane's head; resolves with when to try it again, or null when it is done. */
  private async attempt(delivery: PendingDelivery): Promise<number | null> {
    try {
      return await this.attemptOnce(delivery);
    } catch (err) {
      log.error('webhook delivery attempt failed', { err, delivery_id: delivery.record.id });
      return this.clock.now() + this.opts.retryBaseMs;
    }
  }

  private async attemptOnce(delivery: PendingDelivery): Promise<number | null> {
    const target = this.state.target(delivery.orgId, delivery.targetId);
    if (!target) return null;
    const { record } = delivery;
    const result = await this.http.send(target, record);
    if (this.stopped) return null;
    const attempts = record.attempts + 1;
    const { status, nextAt } = afterAttempt(result.verdict, attempts, result.retryAfterMs, this.opts.retryBaseMs, this.clock.now());
    delivery.record = {
      ...record,
      status,
      attempts,
      last_status_code: result.statusCode,
      last_error: result.error,
      next_attempt_at: nextAt === null ? null : new Date(nextAt).toISOString(),
    };
    this.state.save(delivery);
    return nextAt;
  }

  private async pruneLoop(): Promise<void> {
    try {
      await pruneDeliveryLog(this.opts.storage, this.opts.directory, this.clock.now() - this.opts.retentionMs, () => this.stopped);
    } catch (err) {
      log.error('webhook delivery log pruning failed', { err });
    }
    if (this.stopped) return;
    this.cancelPrune = this.clock.schedule(PRUNE_EVERY_MS, () => void this.pruneLoop());
  }
}
