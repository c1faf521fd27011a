/**
 * The deadline of each delivery attempt: `AbortSignal.any` of its own `AbortSignal.timeout` and
 * the actor's shutdown, whichever comes first.
 *
 * The shutdown side is a fresh controller every EPOCH attempts rather than one for the actor's
 * life: Node 20's `AbortSignal.any` adds every signal it makes to each source's list of dependants
 * and prunes that list only when the source aborts, so a single long-lived source grows by one
 * entry per attempt without bound (measured: a million attempts held a million entries after a
 * full GC). A controller retired more than `timeoutMs` ago only served attempts whose own timeout
 * has already fired, so it is let go and its list with it.
 */
const EPOCH = 4096;

export interface AttemptDeadlinesOptions {
  /** Attempts per shutdown controller. */
  epoch?: number;
  /** Monotonic milliseconds: retirement is measured against the same time as `AbortSignal.timeout`. */
  monotonicNow?: () => number;
}

export class AttemptDeadlines {
  private current = new AbortController();
  private handedOut = 0;
  /** Controllers of earlier epochs whose attempts may still be under way, oldest first. */
  private readonly retired: Array<{ controller: AbortController; at: number }> = [];

  private readonly epoch: number;
  private readonly monotonicNow: () => number;

  constructor(
    private readonly timeoutMs: number,
    opts: AttemptDeadlinesOptions = {},
  ) {
    this.epoch = opts.epoch ?? EPOCH;
    this.monotonicNow = opts.monotonicNow ?? (() => performance.now());
  }

  /** The signal of one attempt starting now. */
  next(): AbortSignal {
    if (++this.handedOut > this.epoch && !this.current.signal.aborted) this.rotate();
    return AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.current.signal]);
  }

  /** Aborts every attempt under way and every one started from now on. */
  shutdown(): void {
    for (const { controller } of this.retired) controller.abort();
    this.retired.length = 0;
    this.current.abort();
  }

  /** Whether `signal` (from `next`) ended because the attempt's own time ran out. */
  static timedOut(signal: AbortSignal): boolean {
    return signal.aborted && (signal.reason as Error | undefined)?.name === 'TimeoutError';
  }

  /** How many controllers are held (the current one included). */
  get held(): number {
    return this.retired.length + 1;
  }

  private rotate(): void {
    const now = this.monotonicNow();
    this.retired.push({ controller: this.current, at: now });
    while (this.retired.length && now - this.retired[0]!.at > this.timeoutMs) this.retired.shift();
    this.current = new AbortController();
    this.handedOut = 1;
  }
}
