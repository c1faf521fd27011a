import type { Clock } from './clock.js';
import type { PendingDelivery } from './delivery-state.js';

/**
 * Lane scheduling (API §11.3 order). A lane is one target and one repository: it sends its head
 * delivery until it succeeds or fails for good, then the next (head of line, event order). Lanes
 * of a target interleave first-come first-served with at most `concurrencyPerTarget` attempts in
 * flight, and targets never wait on each other: a slow or dead receiver only ever holds its own
 * lanes, and one repository's failing head never holds another repository's deliveries.
 *
 * A lane keeps its next deliveries in memory, handed over by the fan-out that created them, so
 * that a delivery is not read back from LMDB before it is sent. Memory is bounded: past
 * LANE_MEMORY deliveries in a lane, or TOTAL_MEMORY in all, a lane stops taking them from the
 * fan-out and reads them from the pending index, in order, once those in memory are done. A dead
 * receiver's backlog therefore costs disk, not heap. After a restart, or a delivery created by
 * another thread (a redelivery), the lane reads from the index too.
 */
const LANE_MEMORY = 64;
const TOTAL_MEMORY = 65_536;

export interface LaneSchedulerOptions {
  clock: Clock;
  concurrencyPerTarget: number;
  /** Up to `limit` of the lane's pending deliveries, in order, from the pending index. */
  readLane(orgId: string, targetId: string, lane: string, limit: number): PendingDelivery[];
  /** One attempt of the lane's head; resolves with when to try it again, or null when the lane moves on. Never rejects. */
  attempt(delivery: PendingDelivery): Promise<number | null>;
}

class Lane {
  /** The head (being sent or waiting for its retry) and the deliveries after it, in order. */
  readonly queue: PendingDelivery[] = [];
  /** Whether deliveries of this lane wait in the pending index beyond those in `queue`. */
  onDisk = false;
  /** Whether the head is ready, waiting, or being sent. */
  scheduled = false;
  constructor(
    readonly orgId: string,
    readonly key: string,
  ) {}
}

class TargetQueue {
  readonly lanes = new Map<string, Lane>();
  /** Lanes whose head is due and idle, served first come first served. */
  readonly ready: Lane[] = [];
  /** Lanes whose head waits for its retry time. */
  readonly waiting = new Map<Lane, number>();
  busy = 0;
  cancelTimer: (() => void) | null = null;
  timerAt = Infinity;
  constructor(readonly targetId: string) {}
}

export class LaneScheduler {
  private readonly targets = new Map<string, TargetQueue>();
  private readonly running = new Set<Promise<void>>();
  /** Lane heads being sent. */
  private readonly sending = new Set<PendingDelivery>();
  /** Heads being sent whose shard was dropped meanwhile: their lane moves on whatever the outcome. */
  private readonly dropped = new Set<PendingDelivery>();
  /** Deliveries held in lane queues. */
  private held = 0;
  private stopped = false;

  constructor(private readonly opts: LaneSchedulerOptions) {}

  /** A delivery the fan-out has just made durable: appended to its lane, or left on disk. */
  add(delivery: PendingDelivery): void {
    if (this.stopped) return;
    const lane = this.lane(delivery.orgId, delivery.targetId, delivery.lane);
    if (lane.onDisk || lane.queue.length >= LANE_MEMORY || this.held >= TOTAL_MEMORY) lane.onDisk = true;
    else {
      lane.queue.push(delivery);
      this.held++;
    }
    if (!lane.scheduled) this.next(this.targets.get(delivery.targetId)!, lane);
  }

  /** The lane has deliveries in the pending index this scheduler has not seen (a restart, a redelivery). */
  resume(orgId: string, targetId: string, laneKey: string): void {
    if (this.stopped) return;
    const lane = this.lane(orgId, targetId, laneKey);
    lane.onDisk = true;
    if (!lane.scheduled) this.next(this.targets.get(targetId)!, lane);
  }

  /** No attempt starts from now on; resolves once those under way have settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const q of this.targets.values()) q.cancelTimer?.();
    await Promise.allSettled([...this.running]);
  }

  /**
   * Forgets the deliveries of a shard no longer owned: no attempt of theirs starts from now on
   * (one under way finishes, its outcome left unwritten). Their lanes go on with what they hold
   * of other shards.
   */
  dropShard(shard: number): void {
    for (const q of this.targets.values()) {
      for (const lane of [...q.lanes.values()]) {
        const kept = lane.queue.filter((d) => d.shard !== shard || this.sending.has(d));
        for (const d of kept) if (d.shard === shard) this.dropped.add(d);
        if (kept.length === lane.queue.length) continue;
        this.held -= lane.queue.length - kept.length;
        const headGone = lane.queue[0] !== kept[0];
        lane.queue.splice(0, lane.queue.length, ...kept);
        if (!headGone || !lane.scheduled) continue;
        // The head was waiting (due or for its retry), not being sent: schedule the next one.
        const ready = q.ready.indexOf(lane);
        if (ready >= 0) q.ready.splice(ready, 1);
        q.waiting.delete(lane);
        this.next(q, lane);
      }
      this.armTimer(q);
    }
  }

  private lane(orgId: string, targetId: string, key: string): Lane {
    let q = this.targets.get(targetId);
    if (!q) this.targets.set(targetId, (q = new TargetQueue(targetId)));
    let lane = q.lanes.get(key);
    if (!lane) q.lanes.set(key, (lane = new Lane(orgId, key)));
    return lane;
  }

  /** Schedules the lane's head, reading on from the index when memory has none; retires an empty lane. */
  private next(q: TargetQueue, lane: Lane): void {
    if (!lane.queue.length && lane.onDisk) {
      const limit = Math.max(1, Math.min(LANE_MEMORY, TOTAL_MEMORY - this.held));
      const read = this.opts.readLane(lane.orgId, q.targetId, lane.key, limit);
      lane.queue.push(...read);
      this.held += read.length;
      if (read.length < limit) lane.onDisk = false;
    }
    const head = lane.queue[0];
    if (!head) {
      lane.scheduled = false;
      q.lanes.delete(lane.key);
      if (!q.lanes.size) {
        q.cancelTimer?.();
        this.targets.delete(q.targetId);
      }
      return;
    }
    lane.scheduled = true;
    if (head.dueAt <= this.opts.clock.now()) q.ready.push(lane);
    else {
      q.waiting.set(lane, head.dueAt);
      this.armTimer(q);
    }
    this.fill(q);
  }

  private armTimer(q: TargetQueue): void {
    let next = Infinity;
    for (const at of q.waiting.values()) next = Math.min(next, at);
    if (next === q.timerAt) return;
    q.cancelTimer?.();
    q.cancelTimer = null;
    q.timerAt = next;
    if (next === Infinity || this.stopped) return;
    const { clock } = this.opts;
    q.cancelTimer = clock.schedule(next - clock.now(), () => {
      q.cancelTimer = null;
      q.timerAt = Infinity;
      const now = clock.now();
      for (const [lane, at] of q.waiting) {
        if (at > now) continue;
        q.waiting.delete(lane);
        q.ready.push(lane);
      }
      this.armTimer(q);
      this.fill(q);
    });
  }

  private fill(q: TargetQueue): void {
    while (!this.stopped && q.busy < this.opts.concurrencyPerTarget && q.ready.length) {
      const lane = q.ready.shift()!;
      const head = lane.queue[0]!;
      q.busy++;
      this.sending.add(head);
      // One reaction per attempt: the attempt leaves `running` as it settles.
      const run: Promise<void> = this.opts.attempt(head).then((nextAt) => {
        this.running.delete(run);
        this.settle(q, lane, head, nextAt);
      });
      this.running.add(run);
    }
  }

  /** After an attempt: the lane moves on (nextAt null) or retries its head at `nextAt`. */
  private settle(q: TargetQueue, lane: Lane, head: PendingDelivery, nextAt: number | null): void {
    q.busy--;
    this.sending.delete(head);
    if (this.stopped) return;
    if (this.dropped.delete(head) || nextAt === null) {
      lane.queue.shift();
      this.held--;
      this.next(q, lane);
    } else {
      head.dueAt = nextAt;
      q.waiting.set(lane, nextAt);
      this.armTimer(q);
    }
    this.fill(q);
  }
}
