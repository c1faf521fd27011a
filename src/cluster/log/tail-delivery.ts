import type { ShardLogEntry, ShardLogTail } from '../shard-log.js';
import { EntryChain } from './entry-chain.js';

/** Entries queued while a batch is being applied before the source is made to wait. */
const QUEUE_LIMIT = 512;

/**
 * The delivery side of a `ShardLog.tail`, shared by the backends: it passes on the valid entries
 * only (`EntryChain`: a gap ends the tail with `ShardLogTrimmed`), drops repeats a source may
 * deliver after it resumes, and hands the queued entries to `onEntries` as one batch, one call at
 * a time. The backend pushes every stored entry and reads `position` to know where to resume.
 */
export class TailDelivery implements ShardLogTail {
  readonly done: Promise<void>;
  private queue: ShardLogEntry[] = [];
  private running: Promise<void> | null = null;
  private stopped = false;
  private error: unknown;
  private settle!: (err?: unknown) => void;
  private readonly stopSource: () => Promise<void>;
  private readonly chain: EntryChain;

  constructor(
    shard: number,
    after: number,
    private readonly onEntries: (entries: ShardLogEntry[]) => Promise<void>,
    stopSource: () => Promise<void>,
  ) {
    this.chain = new EntryChain(shard, after);
    this.stopSource = stopSource;
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (err) => (err === undefined ? resolve() : reject(err instanceof Error ? err : new Error('shard log tail failed', { cause: err })));
    });
    // A tail nobody awaits must not crash the process with an unhandled rejection.
    this.done.catch(() => undefined);
  }

  /** The last stored sequence pushed (valid or not). */
  get position(): number {
    return this.chain.cursor;
  }

  get active(): boolean {
    return !this.stopped;
  }

  /** Queues `entry`; resolves when the source may push more (the queue is short enough). */
  async push(entry: ShardLogEntry): Promise<void> {
    if (this.stopped) return;
    let valid: boolean;
    try {
      valid = this.chain.accept(entry);
    } catch (err) {
      this.end(err);
      return;
    }
    if (!valid) return;
    this.queue.push(entry);
    this.running ??= this.drain();
    if (this.queue.length >= QUEUE_LIMIT) await this.running;
  }

  /**
   * Ends the tail: the source is told to stop at once, and `done` settles (rejecting with `err`
   * when given) as soon as no `onEntries` call is running. Never waits for the source, which may
   * be the caller.
   */
  end(err?: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    this.error = err;
    this.queue = [];
    void this.stopSource().catch(() => undefined);
    if (!this.running) this.settle(err);
  }

  /** Resolves once the running `onEntries` call (if any) returns: do not await it inside one. */
  stop(): Promise<void> {
    this.end();
    return this.done;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.stopped) {
        const batch = this.queue;
        this.queue = [];
        await this.onEntries(batch);
      }
    } catch (err) {
      this.running = null;
      this.end(err);
      return;
    }
    this.running = null;
    if (this.stopped) this.settle(this.error);
  }
}

/** A backend's open tails: each kept while it lasts, all stopped when the log closes. */
export class OpenTails {
  private readonly tails = new Set<TailDelivery>();

  /** Runs `source`, the backend's loop pushing stored entries into `delivery`; its failure ends the tail. */
  start(delivery: TailDelivery, source: () => Promise<void>): ShardLogTail {
    this.tails.add(delivery);
    void delivery.done.finally(() => this.tails.delete(delivery)).catch(() => undefined);
    source().catch((err: unknown) => delivery.end(err));
    return delivery;
  }

  async stopAll(): Promise<void> {
    await Promise.allSettled([...this.tails].map((t) => t.stop()));
  }
}
