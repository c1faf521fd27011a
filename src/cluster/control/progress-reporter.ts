import type { Etcd3 } from 'etcd3';
import type { ControlKeys } from './keys.js';
import type { Membership } from './membership.js';
import type { NodeProgress, ShardProgress } from './records.js';

/**
 * A node's side of the progress contract (records.ts, NodeProgress): followers call `report` as
 * they apply the log and `forget` when they stop following a shard; the reporter writes the whole
 * map to `progress/<id>` under the node's lease at most once per `intervalMs`, and only when it
 * changed, so a node costs etcd about one write a second however many shards it follows.
 */
export class ProgressReporter {
  private readonly shards = new Map<number, ShardProgress>();
  private dirty = false;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly client: Etcd3,
    private readonly keys: ControlKeys,
    private readonly membership: Membership,
    private readonly intervalMs = 1000,
  ) {}

  report(shard: number, progress: ShardProgress): void {
    const old = this.shards.get(shard);
    if (old && old.epoch === progress.epoch && old.applied === progress.applied && old.lag === progress.lag) return;
    this.shards.set(shard, progress);
    this.touch();
  }

  forget(shard: number): void {
    if (this.shards.delete(shard)) this.touch();
  }

  /** Writes what is pending now (the interval's timer does it otherwise). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write());
    return this.flushing;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private touch(): void {
    this.dirty = true;
    if (this.closed) return;
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, this.intervalMs);
  }

  private async write(): Promise<void> {
    if (!this.dirty) return;
    // A fenced node writes nothing; it tries again while it may recover.
    if (!this.membership.mayServe()) return this.touch();
    this.dirty = false;
    const value: NodeProgress = { shards: Object.fromEntries([...this.shards].map(([s, p]) => [String(s), p])) };
    try {
      await this.client.put(this.keys.progressOf(this.membership.info.id)).value(JSON.stringify(value)).lease(this.membership.grantedLease());
    } catch {
      this.touch();
    }
  }
}
