/**
 * The time the webhook actor schedules by: when a retry is due, when the outbox is checked again,
 * when the log is pruned, and the timestamps it writes and signs. Injected, so that the tests can
 * run the §11.3 retry schedule (hours long) on a clock they move by hand.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; the returned function cancels it. Never keeps the thread alive. */
  schedule(ms: number, fn: () => void): () => void;
}

/** setTimeout's longest delay: a later time is reached by waking early and scheduling again. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
    timer.unref();
    return () => clearTimeout(timer);
  },
};
