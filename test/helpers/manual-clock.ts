import type { Clock } from '../../src/actors/system/webhooks/clock.js';

/**
 * A clock the test moves by hand, for the webhook actor (`Clock`): time stands still until
 * `advanceTo`, which runs every timer whose time has come, earliest first, at its own time.
 */
export class ManualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = Date.now()) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  schedule(ms: number, fn: () => void): () => void {
    const id = this.seq++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return () => void this.timers.delete(id);
  }

  /** Whether a timer is set for exactly `at`. */
  hasTimerAt(at: number): boolean {
    for (const timer of this.timers.values()) if (timer.at === at) return true;
    return false;
  }

  /** Moves time to `to`, running on the way each timer set for then or earlier. */
  advanceTo(to: number): void {
    for (;;) {
      let nextId = -1;
      let next: { at: number; fn: () => void } | undefined;
      for (const [id, timer] of this.timers) {
        if (timer.at <= to && (!next || timer.at < next.at)) {
          nextId = id;
          next = timer;
        }
      }
      if (!next) break;
      this.timers.delete(nextId);
      this.time = Math.max(this.time, next.at);
      next.fn();
    }
    this.time = Math.max(this.time, to);
  }
}
