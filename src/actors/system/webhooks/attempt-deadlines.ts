/**
 * The deadline of delivery attempts: `AbortSignal.any` of an `AbortSignal.timeout` and the actor's
 * shutdown, whichever comes first.
 *
 * Attempts that start within SHARE_MS of each other share one signal, whose timeout is longer by
 * SHARE_MS: each attempt still gets at least `timeoutMs` (API §11.3: an answer within 10 s counts),
 * at most SHARE_MS more. A signal per attempt cost about 65 µs of CPU each (two signals, a timer,
 * the bookkeeping of `any` and their collection), the largest single cost of an attempt once
 * thousands go out every second.
 *
 * The shutdown side is a fresh controller every EPOCH signals rather than one for the actor's
 * life: Node 20's `AbortSignal.any` adds every signal it makes to each source's list of dependants
 * and prunes that list only when the source aborts, so a single long-lived source grows by one
 * entry per signal without bound (measured: a million signals held a million entries after a
 * full GC). A controller retired more than the timeout ago only served attempts whose own timeout
 * has already fired, so it is let go and its list with it.
 */
const SHARE_MS = 50;
const EPOCH = 1024;

/** The deadline of the attempts of one window. */
export class Deadline {
  private readonly watchers = new Set<() => void>();

  constructor(readonly signal: AbortSignal) {
    // One listener per window, not one per attempt: a signal's listeners are a list that each
    // removal walks, and a window serves hundreds of attempts.
    signal.addEventListener('abort', () => {
      for (const fn of this.watchers) fn();
      this.watchers.clear();
    }, { once: true });
  }

  /** Calls `fn` when the deadline passes (at once if it has), unless the returned function is called first. */
  watch(fn: () => void): () => void {
    if (this.signal.aborted) {
      fn();
      return () => undefined;
    }
    this.watchers.add(fn);
    return () => void this.watchers.delete(fn);
  }

  /** Whether it ended because the attempts' time ran out (rather than at shutdown). */
  get timedOut(): boolean {
    return this.signal.aborted && (this.signal.reason as Error | undefined)?.name === 'TimeoutError';
  }
}

export interface AttemptDeadlinesOptions {
  /** Signals per shutdown controller. */
  epoch?: number;
  /** Monotonic milliseconds: windows and retirement are measured like `AbortSignal.timeout`'s time. */
  monotonicNow?: () => number;
}

export class AttemptDeadlines {
  private current = new AbortController();
  private made = 0;
  /** Controllers of earlier epochs whose attempts may still be under way, oldest first. */
  private readonly retired: Array<{ controller: AbortController; at: number }> = [];
  private shared: Deadline | null = null;
  private sharedSince = -Infinity;
  private readonly epoch: number;
  private readonly monotonicNow: () => number;

  constructor(
    private readonly timeoutMs: number,
    opts: AttemptDeadlinesOptions = {},
  ) {
    this.epoch = opts.epoch ?? EPOCH;
    this.monotonicNow = opts.monotonicNow ?? (() => performance.now());
  }

  /** The deadline of an attempt starting now. */
  next(): Deadline {
    const now = this.monotonicNow();
    if (this.shared && !this.shared.signal.aborted && now - this.sharedSince < SHARE_MS) return this.shared;
    if (++this.made > this.epoch && !this.current.signal.aborted) this.rotate(now);
    this.sharedSince = now;
    this.shared = new Deadline(AbortSignal.any([AbortSignal.timeout(this.timeoutMs + SHARE_MS), this.current.signal]));
    return this.shared;
  }

  /** Aborts every attempt under way and every one started from now on. */
  shutdown(): void {
    for (const { controller } of this.retired) controller.abort();
    this.retired.length = 0;
    this.current.abort();
  }

  /** How many controllers are held (the current one included). */
  get held(): number {
    return this.retired.length + 1;
  }

  private rotate(now: number): void {
    this.retired.push({ controller: this.current, at: now });
    while (this.retired.length && now - this.retired[0]!.at > this.timeoutMs + SHARE_MS) this.retired.shift();
    this.current = new AbortController();
    this.made = 1;
  }
}
