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
import { DeferredEvents, fanOutBatch, outboxEnds } from './outbox-fan-out.js';
import { afterAttempt } from './retry-policy.js';
import { onOutboxEvents } from './outbox-signal.js';
import { OwnedShards, type ShardOwnership } from '../shard-ownership.js';

/**
 * The webhook actor (API §11.3). It runs in its own thread (`worker.ts`), never inside a
 * repository's mailbox, and wires its parts together:
 *
 *   outboxes ──fan-out (outbox-fan-out.ts)──▶ delivery records and pending index, durable
 *          └──▶ the same deliveries, in memory, to their lanes (lane-scheduler.ts; the pending
 *               index when a lane holds too many, after a restart, for a redelivery)
 *   lane head ──▶ signed POST (http-delivery.ts) ──▶ verdict, retry time (retry-policy.ts)
 *             ──▶ outcomes written in batches (delivery-state.ts)
 *
 * and prunes the delivery log (log-pruning.ts) once an hour. All of it on the shards this node
 * owns (`ShardOwnership`): a shard gained is taken up at once (its outbox drained, its pending
 * lanes resumed), a shard lost is let go (nothing more of it is sent or written).
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
  /** The shards whose queues this node drains: all of them unless told otherwise. */
  ownership?: ShardOwnership;
}

const FIRST_PRUNE_MS = 1000;
/** How often every owned outbox is checked, announced or not (outbox-signal.ts). */
const SWEEP_EVERY_MS = 1000;
const PRUNE_EVERY_MS = 3600_000;

export class WebhookDispatcher {
  private readonly clock: Clock;
  private readonly state: DeliveryState;
  private readonly http: HttpDelivery;
  private readonly lanes: LaneScheduler;
  private readonly ownership: ShardOwnership;
  private unsubscribe: (() => void) | null = null;
  /** The org directory's version when the owned shards were last cleared of deleted targets' deliveries. */
  private clearedAt = -1;
  private cancelPoll: (() => void) | null = null;
  private cancelPrune: (() => void) | null = null;
  private polling: Promise<void> | null = null;
  private wokenWhilePolling = false;
  /** Shards whose outboxes were announced since the last drain. */
  private readonly announced = new Set<number>();
  /** Whether the next drain checks every owned outbox. */
  private sweepNext = true;
  private lastSweep = -Infinity;
  private unlisten: (() => void) | null = null;
  private stopped = false;
  private readonly deferred = new DeferredEvents();

  constructor(private readonly opts: DispatcherOptions) {
    this.clock = opts.clock ?? systemClock;
    this.ownership = opts.ownership ?? new OwnedShards();
    this.state = new DeliveryState(opts.storage, opts.directory, this.ownership);
    this.http = new HttpDelivery({ secrets: opts.secrets, brand: opts.brand, allowPrivate: opts.allowPrivate, timeoutMs: opts.timeoutMs, clock: this.clock });
    this.lanes = new LaneScheduler({
      clock: this.clock,
      concurrencyPerTarget: opts.concurrencyPerTarget,
      readLane: (orgId, targetId, lane, limit) => this.state.readLane(orgId, targetId, lane, limit),
      attempt: (delivery) => this.attempt(delivery),
    });
  }

  start(): void {
    this.unsubscribe = this.ownership.onChange((granted, revoked) => this.ownershipChanged(granted, revoked));
    this.unlisten = onOutboxEvents((shards) => this.wake(shards));
    this.resume(this.ownership.ownedShards());
    this.wake();
    this.cancelPrune = this.clock.schedule(FIRST_PRUNE_MS, () => void this.pruneLoop());
  }

  /**
   * Drains now instead of at the next poll: the outboxes of `shards`, or every owned one when
   * none are named.
   */
  wake(shards?: readonly number[]): void {
    if (this.stopped) return;
    if (shards) for (const shard of shards) this.announced.add(shard);
    else this.sweepNext = true;
    if (this.polling) {
      // The drain under way may have passed the shard the news is about: another follows it.
      this.wokenWhilePolling = true;
      return;
    }
    this.cancelPoll?.();
    this.cancelPoll = null;
    this.polling = this.poll().finally(() => {
      this.polling = null;
      if (this.stopped) return;
      if (this.wokenWhilePolling) {
        this.wokenWhilePolling = false;
        this.wake([]);
      } else this.cancelPoll = this.clock.schedule(this.opts.pollMs, () => this.wake([]));
    });
  }

  /** Picks up a redelivery another thread created without waiting for the next poll. */
  adopt(orgId: string, targetId: string, deliveryId: string): void {
    const lane = this.state.pendingRedelivery(orgId, targetId, deliveryId);
    if (lane !== null) this.lanes.resume(orgId, targetId, lane);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unlisten?.();
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

  /** Takes up every lane of `shards` with pending deliveries, as a previous run or owner left them. */
  private resume(shards: readonly number[]): void {
    let lanes = 0;
    for (const { orgId, targetId, lane } of this.state.pendingLanes(shards)) {
      lanes++;
      this.lanes.resume(orgId, targetId, lane);
    }
    if (lanes) log.info('webhook deliveries resumed', { lanes, shards: shards.length });
  }

  private ownershipChanged(granted: readonly number[], revoked: readonly number[]): void {
    if (this.stopped) return;
    for (const shard of revoked) this.lanes.dropShard(shard);
    for (const shard of [...revoked, ...granted]) this.deferred.forget(shard);
    if (granted.length) {
      log.info('webhook shards taken up', { shards: granted.length });
      this.resume(granted);
      // A gained shard may keep deleted targets' deliveries its former owner had not cleared yet.
      this.clearedAt = -1;
      this.wake();
    }
  }

  private async poll(): Promise<void> {
    const now = this.clock.now();
    const sweep = this.sweepNext || now - this.lastSweep >= SWEEP_EVERY_MS;
    const shards = sweep ? this.ownership.ownedShards() : [...this.announced].filter((shard) => this.ownership.owns(shard));
    this.announced.clear();
    this.sweepNext = false;
    if (sweep) this.lastSweep = now;
    try {
      // One batch per turn of the event loop, so deliveries go on during a long drain.
      while (!this.stopped && shards.length && (await this.drainOnce(shards))) await nextTurn();
      await this.clearDeletedTargets();
    } catch (err) {
      log.error('webhook outbox drain failed', { err });
    }
  }

  /** Once the org directory changed: drops what deleted targets left on the owned shards. */
  private async clearDeletedTargets(): Promise<void> {
    const version = this.opts.directory.version();
    if (version === this.clearedAt) return;
    let removed = 0;
    for (const shard of this.ownership.ownedShards()) {
      if (this.stopped) return;
      removed += await this.state.dropDeletedTargets(shard);
    }
    this.clearedAt = version;
    if (removed) log.info('webhook deliveries of deleted targets removed', { removed });
  }

  /**
   * Fans out one batch of the outboxes of `shards`; true when more may wait. The events taken are
   * those already written when the directory is asked to catch up: each was acknowledged after
   * any target its writer had been told was created, so the directory then holds that target.
   * In cluster mode a delivery leaves only once the shard log holds its event: a receiver must
   * not hear of a write whose append is then refused. A refused shard's deliveries stay unsent;
   * its copy here is rebuilt from the log, and the events the log does hold come back to its outbox.
   */
  private async drainOnce(shards: readonly number[]): Promise<boolean> {
    const ends = outboxEnds(this.opts.storage, shards, this.deferred, this.clock.now());
    if (!ends.size) return false;
    // Not caught up (etcd did not answer): the events wait for the next poll.
    if (!(await this.opts.directory.caughtUp())) return false;
    // A shard lost meanwhile is its new owner's.
    for (const shard of ends.keys()) if (!this.ownership.owns(shard)) ends.delete(shard);
    const owned = [...ends.keys()];
    const batch = fanOutBatch(this.opts.storage, this.opts.directory, ends, this.clock.now(), this.deferred);
    if (!batch) return false;
    // A sink that failed replicated none of it.
    const refused = await Promise.resolve(batch.logged).then((r) => r ?? [], () => owned);
    for (const d of batch.created) if (!refused.includes(d.shard)) this.lanes.add(d);
    return batch.more;
  }

  /**
   * One attempt of a lane's head; resolves with when to try it again, or null when it is done.
   * Never rejects: whatever throws is logged and the attempt tried again later.
   */
  private async attempt(delivery: PendingDelivery): Promise<number | null> {
    const { record } = delivery;
    try {
      const target = this.state.target(delivery.orgId, delivery.targetId);
      if (!target) return null;
      const result = await this.http.send(target, record, delivery.body);
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
    } catch (err) {
      log.error('webhook delivery attempt failed', { err, delivery_id: record.id });
      return this.clock.now() + this.opts.retryBaseMs;
    }
  }

  private async pruneLoop(): Promise<void> {
    try {
      await pruneDeliveryLog(this.opts.storage, this.ownership, this.clock.now() - this.opts.retentionMs, () => this.stopped);
    } catch (err) {
      log.error('webhook delivery log pruning failed', { err });
    }
    if (this.stopped) return;
    this.cancelPrune = this.clock.schedule(PRUNE_EVERY_MS, () => void this.pruneLoop());
  }
}
