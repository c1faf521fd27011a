/**
 * Long work on a thread others share, done in slices: once it has held the thread longer than
 * the slice, `yield` lets the event loop turn before it goes on. The check is synchronous, so a
 * loop pays for a turn only when one is due.
 */
export class TimeSlice {
  private start = performance.now();

  constructor(private readonly ms: number) {}

  /** True once the work has held the thread longer than the slice. */
  get over(): boolean {
    return performance.now() - this.start > this.ms;
  }

  /** Lets the event loop turn once, then starts a new slice. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.start = performance.now();
  }
}

/** How long one request's work may hold the front end's thread before other requests run. */
export const FRONT_END_SLICE_MS = 10;
