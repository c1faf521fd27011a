/**
 * How urgent a shard's activation is. A node activates a few shards at a time, and at start-up or
 * after a failover it may have a couple of hundred to do: a shard a request is waiting for goes
 * first, then a follower promoted because its owner failed (its data is current and its clients
 * are retrying), then the rest (fresh placements, rebuilt copies) in arrival order.
 */
export const ActivationUrgency = { Placed: 0, Promoted: 1, Demanded: 2 } as const;
export type ActivationUrgency = (typeof ActivationUrgency)[keyof typeof ActivationUrgency];

interface Waiting {
  urgency: ActivationUrgency;
  order: number;
  start: () => void;
}

/** At most `max` activations run at once; the others wait, most urgent first. */
export class ActivationQueue {
  private running = 0;
  private arrivals = 0;
  private readonly waiting = new Map<number, Waiting>();

  constructor(private readonly max: number) {}

  /** Runs `step` for `shard` once a slot is free and no more urgent shard waits. */
  async run<T>(shard: number, urgency: ActivationUrgency, step: () => Promise<T>): Promise<T> {
    if (this.running >= this.max || this.waiting.size > 0) {
      await new Promise<void>((start) => this.waiting.set(shard, { urgency, order: this.arrivals++, start }));
    }
    this.running++;
    try {
      return await step();
    } finally {
      this.running--;
      this.next();
    }
  }

  /** A request waits for `shard`: if its activation is queued, it goes to the front. */
  demand(shard: number): void {
    const entry = this.waiting.get(shard);
    if (entry) entry.urgency = ActivationUrgency.Demanded;
  }

  private next(): void {
    let best: [number, Waiting] | null = null;
    for (const candidate of this.waiting) {
      const [, w] = candidate;
      if (!best || w.urgency > best[1].urgency || (w.urgency === best[1].urgency && w.order < best[1].order)) best = candidate;
    }
    if (!best) return;
    this.waiting.delete(best[0]);
    best[1].start();
  }
}
