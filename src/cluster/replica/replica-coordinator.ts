import { SHARD_COUNT, slotOf } from '../../actors/shard-map.js';
import type { ActorRuntime } from '../../actors/runtime.js';
import { log } from '../../log.js';
import type { PlacementView } from '../placement.js';
import type { ReplicaControl, ReplicaControlReply, ShardAssignment } from './replica-control.js';
import type { ShardReport } from './replica-report.js';

/** How long a worker holds a `changes` request when nothing changed (bounds a graceful stop). */
const CHANGES_WAIT_MS = 1000;

/**
 * The front end's side of the shard replicas (cluster mode). It turns the placement view into
 * each shard's role on this node and sends it to the worker that owns the shard; it keeps the
 * latest report of every shard, so the front end serves a shard only while its worker says it
 * is active, and it tells `onInactive` when a shard stops being active here (cached records of
 * the shard must go). A worker that dies is given its shards again: its replacement reads each
 * shard's position from LMDB.
 */
export class ReplicaCoordinator {
  private readonly latest = new Array<ShardReport | undefined>(SHARD_COUNT);
  private readonly sent = new Array<string>(SHARD_COUNT).fill('');
  private unsubscribe: (() => void) | null = null;
  private closed = false;
  private readonly polls: Array<Promise<void>> = [];

  constructor(
    private readonly view: PlacementView,
    private readonly runtime: ActorRuntime,
    private readonly onInactive: (shard: number) => void,
  ) {}

  start(): void {
    this.unsubscribe = this.view.onChange((shards) => void this.assign(shards));
    void this.assign(allShards());
    for (let slot = 0; slot < this.runtime.workerCount; slot++) this.polls.push(this.poll(slot));
  }

  /** Whether this node's copy of the shard is the active owner's (the front end may serve it). */
  active(shard: number): boolean {
    return this.latest[shard]?.state === 'active';
  }

  reports(): ShardReport[] {
    return this.latest.filter((r): r is ShardReport => r !== undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    await Promise.all(this.polls);
  }

  private assignment(shard: number): ShardAssignment {
    const placement = this.view.shard(shard);
    const me = this.view.localNodeId;
    const role = placement?.owner === me ? 'owner' : placement?.followers.includes(me) ? 'follower' : 'none';
    return { shard, role, epoch: placement?.epoch ?? 0 };
  }

  private async assign(shards: number[], force = false): Promise<void> {
    const bySlot = new Map<number, ShardAssignment[]>();
    for (const shard of shards) {
      const a = this.assignment(shard);
      const key = `${a.role}:${a.epoch}`;
      if (!force && this.sent[shard] === key) continue;
      this.sent[shard] = key;
      const slot = slotOf(shard, this.runtime.workerCount);
      let list = bySlot.get(slot);
      if (!list) bySlot.set(slot, (list = []));
      list.push(a);
    }
    await Promise.all(
      [...bySlot].map(async ([slot, assignments]) => {
        try {
          this.take(await this.control(slot, { type: 'assign', assignments }));
        } catch (err) {
          // The worker died: poll() gives the slot's shards to its replacement.
          log.warn('shard assignment failed', { slot, err });
        }
      }),
    );
  }

  private async poll(slot: number): Promise<void> {
    while (!this.closed) {
      try {
        this.take(await this.control(slot, { type: 'changes', waitMs: CHANGES_WAIT_MS }));
      } catch {
        if (this.closed) return;
        // A replacement worker starts with no replicas: assign every shard of the slot again.
        for (const shard of allShards()) if (slotOf(shard, this.runtime.workerCount) === slot) this.lost(shard);
        await new Promise((r) => setTimeout(r, 200));
        await this.assign(
          allShards().filter((s) => slotOf(s, this.runtime.workerCount) === slot),
          true,
        );
      }
    }
  }

  private control(slot: number, message: ReplicaControl): Promise<ReplicaControlReply> {
    return this.runtime.control(slot, message) as Promise<ReplicaControlReply>;
  }

  private take(reports: ReplicaControlReply): void {
    for (const report of reports) {
      const was = this.latest[report.shard]?.state;
      this.latest[report.shard] = report;
      if (was === 'active' && report.state !== 'active') this.onInactive(report.shard);
    }
  }

  private lost(shard: number): void {
    if (this.latest[shard]?.state === 'active') this.onInactive(shard);
    this.latest[shard] = undefined;
  }
}

const allShards = (): number[] => Array.from({ length: SHARD_COUNT }, (_, i) => i);
