import type { Clock } from './clock.js';
import type { DeliveryRecord } from './records.js';

/**
 * Lane scheduling (API §11.3 order). A lane is one target and one repository: it sends its head
 * delivery until it succeeds or fails for good, then takes the next (head of line, event order).
 * Only lane heads live in memory, so a dead receiver's backlog costs disk, not heap. Lanes of a
 * target interleave first-come first-served with at most `concurrencyPerTarget` attempts in
 * flight, and targets never wait on each other: a slow or dead receiver only ever holds its own
 * lanes.
 */
export interface LaneHead {
  orgId: string;
  targetId: string;
  lane: string;
  /** The delivery as its last attempt left it (written, or queued to be). */
  record: DeliveryRecord;
  /** When its next attempt is due. */
  dueAt: number;
}

export interface LaneSchedulerOptions {
  clock: Clock;
  concurrencyPerTarget: number;
  /** The lane's first pending delivery, or null when it has none. */
  firstPending(targetId: string, lane: string): LaneHead | null;
  /** One attempt of the head; resolves with when to try it again, or null when the lane moves on. Never rejects. */
  attempt(head: LaneHead): Promise<number | null>;
}

class TargetQueue {
  /** The delivery each lane is on (the first of its pending index entries). */
  readonly heads = new Map<string, LaneHead>();
  /** Lanes whose head is due and idle, served first come first served. */
  readonly ready: string[] = [];
  /** Lanes whose head waits for a retry time. */
  readonly waiting = new Map<string, number>();
  readonly busy = new Set<string>();
  cancelTimer: (() => void) | null = null;
  timerAt = Infinity;
  constructor(readonly targetId: string) {}
}

export class LaneScheduler {
  private readonly queues = new Map<string, TargetQueue>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly opts: LaneSchedulerOptions) {}

  /** A lane may have work: unless it is already on a delivery, it takes its first pending one. */
  offer(targetId: string, lane: string): void {
    if (this.stopped) return;
    let q = this.queues.get(targetId);
    if (!q) this.queues.set(targetId, (q = new TargetQueue(targetId)));
    if (q.heads.has(lane)) return;
    this.advance(q, lane);
    this.fill(q);
  }

  /** No attempt starts from now on; resolves once those under way have settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const q of this.queues.values()) q.cancelTimer?.();
    await Promise.allSettled([...this.running]);
  }

  /** Makes the lane's first pending delivery its head (or retires the lane when there is none). */
  private advance(q: TargetQueue, lane: string): void {
    q.heads.delete(lane);
    const head = this.opts.firstPending(q.targetId, lane);
    if (head) {
      q.heads.set(lane, head);
      if (head.dueAt <= this.opts.clock.now()) q.ready.push(lane);
      else {
        q.waiting.set(lane, head.dueAt);
        this.armTimer(q);
      }
    }
    if (q.heads.size === 0 && q.busy.size === 0) {
      q.cancelTimer?.();
      this.queues.delete(q.targetId);
    }
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
    while (!this.stopped && q.busy.size < this.opts.concurrencyPerTarget && q.ready.length) {
      const lane = q.ready.shift()!;
      const head = q.heads.get(lane)!;
      q.busy.add(lane);
      const run = this.opts.attempt(head).then((nextAt) => this.settle(q, lane, head, nextAt));
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  /** After an attempt: the lane moves on (nextAt null) or retries its head at `nextAt`. */
  private settle(q: TargetQueue, lane: string, head: LaneHead, nextAt: number | null): void {
    q.busy.delete(lane);
    if (this.stopped) return;
    if (nextAt === null) this.advance(q, lane);
    else {
      head.dueAt = nextAt;
      q.waiting.set(lane, nextAt);
      this.armTimer(q);
    }
    this.fill(q);
  }
}
