import { NESTABLE_COMMIT_THEN_SYNC } from '../../storage/commit-flags.js';
import type { Storage } from '../../storage/database.js';

interface Queued {
  work: () => void;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * The replicas' own local writes of every shard on this node — followers' applies, owners'
 * acknowledged positions — committed together: one local transaction per turn of the event loop
 * instead of one per shard and delivery or acknowledgement. They run on the main thread, beside
 * the front end, and a transaction there waits for LMDB's write lock (shared with the actor
 * workers) and then for its commit: under writes spread over many shards, the per-shard
 * transactions took 43 % of a node's main thread (docs/measurements/2026-11-28-cluster-writes.md).
 * Each work runs as a child transaction: one that throws rolls back alone and rejects its own
 * promise; the others commit. The commit syncs after releasing the write lock (commit-flags.ts).
 */
export class ApplyBatch {
  private queued: Queued[] = [];
  private scheduled = false;

  constructor(private readonly storage: Storage) {}

  /** Runs `work` (its writes in a nested `transactionSync`) in the next batch; settles once committed. */
  run(work: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ work, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // Every delivery of this turn (the log's client hands them over in bursts) joins the batch.
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const queued = this.queued;
    this.queued = [];
    const failures = new Map<Queued, unknown>();
    try {
      this.storage.root.transactionSync(() => {
        for (const q of queued) {
          try {
            q.work();
          } catch (err) {
            failures.set(q, err);
          }
        }
      }, NESTABLE_COMMIT_THEN_SYNC);
    } catch (err) {
      for (const q of queued) q.reject(err);
      return;
    }
    for (const q of queued) {
      if (failures.has(q)) q.reject(failures.get(q));
      else q.resolve();
    }
  }
}
