import { performance } from 'node:perf_hooks';
import type { Etcd3 } from 'etcd3';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import { log } from '../../log.js';
import type { EtcdPlacementView } from './etcd-placement-view.js';
import type { ControlKeys } from './keys.js';
import type { Membership } from './membership.js';
import { planPlacement, type PlacementWrite, type WriteReason } from './planner.js';
import { PrefixCache } from './prefix-cache.js';
import { decodeControllerRecord, decodeProgress, encodePlacement, type ControllerRecord, type NodeProgress, type ShardProgress } from './records.js';

/**
 * The controller: every node runs one, exactly one of them is elected and writes the placement
 * table. Election is a key bound to the candidate's own membership lease (no second lease per
 * node), created only if absent; it vanishes with the lease, and the other candidates, which
 * retry every round, take over. Every placement write is one transaction that compares the
 * entry's mod_revision (compare-and-swap) and the controller key's create_revision (this very
 * election), so neither a stale table nor a deposed controller can write.
 *
 * A round runs at each change of the membership, drain requests, placement or progress, and at
 * least every `roundMs`. A fenced controller (its own lease unconfirmed) does nothing.
 */

export interface ControllerOptions {
  replicas: number;
  maxMoves: number;
  /** Membership must stay unchanged this long before placing or rebalancing (debounce). */
  stableS: number;
  /** Longest wait between rounds. */
  roundMs?: number;
}

/** The placement writes of a controller so far, by reason (for metrics and tests). */
export type WriteCounts = Record<WriteReason, number>;

/** etcd refuses a transaction of more than 128 compares (its --max-txn-ops); one is the term's. */
const WRITES_PER_TXN = 100;

export class Controller {
  private readonly controllerCache: PrefixCache<ControllerRecord>;
  private readonly drainCache: PrefixCache<true>;
  private readonly progressCache: PrefixCache<NodeProgress>;
  private readonly roundMs: number;
  /** create_revision of the controller key while this node holds it. */
  private term: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private again = false;
  private stopped = false;
  private membershipSignature = '';
  private membershipChangedAt = 0;
  /** Revision of this controller's last placement write; rounds wait until the cache has seen it. */
  private writtenRevision = 0;
  private readonly unsubscribe: Array<() => void> = [];
  /** Each member's lease as the last round saw it, to notice a node that restarted in between. */
  private leases = new Map<string, string>();
  /** Restarted nodes whose shards are still to be promoted elsewhere. */
  private readonly reborn = new Set<string>();
  readonly writes: WriteCounts = { place: 0, promote: 0, repair: 0, 'move-follow': 0, 'move-flip': 0, follow: 0, trim: 0 };
  private readonly roundListeners = new Set<(applied: PlacementWrite[]) => void>();
  /** The suspect nodes that held the last round's rebalancing back, for the log. */
  private held = '';

  constructor(
    private readonly client: Etcd3,
    private readonly keys: ControlKeys,
    private readonly membership: Membership,
    private readonly view: EtcdPlacementView,
    private readonly opts: ControllerOptions,
  ) {
    this.controllerCache = new PrefixCache(client, keys.controller, decodeControllerRecord);
    this.drainCache = new PrefixCache(client, keys.drain, () => true);
    this.progressCache = new PrefixCache(client, keys.progress, decodeProgress);
    this.roundMs = opts.roundMs ?? 250;
  }

  /** Starts campaigning; the view must be started. */
  async start(): Promise<void> {
    await Promise.all([this.controllerCache.start(), this.drainCache.start(), this.progressCache.start()]);
    for (const cache of [this.view.nodesCache, this.view.placementCache, this.controllerCache, this.drainCache, this.progressCache]) {
      this.unsubscribe.push(cache.onChange(() => this.kick()));
    }
    this.kick();
  }

  /** What a node last reported of a shard (progress-reporter.ts), as this node's watch has it; the owner trims its log by it. */
  progressOf(node: string, shard: number): ShardProgress | undefined {
    return this.progressCache.get(node)?.value.shards[String(shard)];
  }

  isLeader(): boolean {
    return this.term !== null && this.membership.mayServe();
  }

  /** Calls `listener` with the writes each round applied (moves for metrics; the limits for tests). */
  onRound(listener: (applied: PlacementWrite[]) => void): () => void {
    this.roundListeners.add(listener);
    return () => this.roundListeners.delete(listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.unsubscribe.forEach((u) => u());
    for (const cache of [this.controllerCache, this.drainCache, this.progressCache]) cache.close();
    // Resign, so another node takes over now rather than when this lease expires.
    if (this.term !== null) {
      await this.client.if(this.keys.controller, 'Create', '==', this.term).then(this.client.delete().key(this.keys.controller)).commit().catch(() => undefined);
      this.term = null;
    }
  }

  /** Runs a round now, or right after the one in progress. */
  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.running = true;
    void this.round()
      .catch(() => undefined)
      .finally(() => {
        this.running = false;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          setImmediate(() => this.kick());
        } else {
          this.timer = setTimeout(() => this.kick(), this.roundMs);
        }
      });
  }

  private async round(): Promise<void> {
    this.trackMembership();
    if (!this.membership.mayServe()) {
      this.term = null;
      return;
    }
    if (!(await this.campaign())) {
      this.reborn.clear();
      return;
    }
    if (this.view.placementCache.revision < this.writtenRevision) return;
    const stable = performance.now() - this.membershipChangedAt >= this.opts.stableS * 1000;
    const live = [...this.leases.keys()].filter((id) => !this.reborn.has(id));
    const input = {
      shardCount: SHARD_COUNT,
      live,
      draining: new Set([...this.drainCache.entriesNow()].map(([id]) => id)),
      placement: (shard: number) => this.view.placementCache.get(String(shard)),
      progress: (node: string, shard: number) => this.progressOf(node, shard),
      replicas: this.opts.replicas,
      maxMoves: this.opts.maxMoves,
      stable,
      calm: true,
    };
    let plan = planPlacement(input);
    // Rebalancing waits while a node is suspect; ask etcd only when there is something to move.
    const suspects = plan.some((w) => isMove(w.reason)) ? await this.suspects(live) : [];
    this.noteHeld(suspects);
    if (suspects.length) plan = planPlacement({ ...input, calm: false });
    const applied = await this.apply(plan);
    if (applied.length === plan.length) this.reborn.clear();
    if (applied.length) {
      log.info('placement written', { controller: this.membership.info.id, ...countByReason(applied) });
      for (const listener of this.roundListeners) listener(applied);
    }
  }

  /**
   * Notes when the set of live and draining nodes last changed (the debounce clock), and which
   * nodes came back under a new lease since the last round: such a node is, until its shards are
   * promoted, as gone (it restarted before this controller saw it leave; its data may be behind).
   */
  private trackMembership(): void {
    const leases = new Map([...this.view.nodesCache.entriesNow()].map(([id, v]) => [id, v.value.lease]));
    for (const [id, lease] of leases) if (this.leases.has(id) && this.leases.get(id) !== lease) this.reborn.add(id);
    this.leases = leases;
    const signature = [...[...leases].map(([id, lease]) => `${id}@${lease}`).sort(), '|', ...[...this.drainCache.entriesNow()].map(([id]) => id).sort()].join(',');
    if (signature !== this.membershipSignature) {
      this.membershipSignature = signature;
      this.membershipChangedAt = performance.now();
    }
  }

  /**
   * Whether this node is the controller: it holds the key (seen through the watch), or takes it
   * when absent. Only an absent key costs a transaction, so followers of the election add no load.
   */
  private async campaign(): Promise<boolean> {
    const me: ControllerRecord = { id: this.membership.info.id, lease: this.membership.grantedLease() };
    const holder = this.controllerCache.get('');
    if (holder) {
      const mine = holder.value.id === me.id && holder.value.lease === me.lease;
      this.term = mine ? holder.modRevision : null;
      return mine;
    }
    const key = this.keys.controller;
    const res = await this.client.if(key, 'Create', '==', 0).then(this.client.put(key).value(JSON.stringify(me)).lease(me.lease)).commit();
    this.term = res.succeeded ? res.header.revision : null;
    // A new controller cannot know how long the membership has been stable: it starts the clock.
    if (res.succeeded) this.membershipChangedAt = performance.now();
    return res.succeeded;
  }

  /** A node is suspect when its lease has less than half its TTL left: it missed renewals. */
  private async suspects(live: string[]): Promise<string[]> {
    const answers = await Promise.all(
      live.map(async (id) => {
        const lease = this.view.nodesCache.get(id)?.value.lease;
        if (!lease) return `${id}: no lease`;
        const res = await this.client.leaseClient.leaseTimeToLive({ ID: lease }).catch((err: Error) => err);
        if (res instanceof Error) return `${id}: ${res.name}`;
        return Number(res.TTL) * 2 < Number(res.grantedTTL) ? `${id}: ${res.TTL}/${res.grantedTTL} s left` : null;
      }),
    );
    return answers.filter((a): a is string => a !== null);
  }

  /** Logs when rebalancing starts or stops being held back by suspect nodes (not every round). */
  private noteHeld(suspects: string[]): void {
    const held = suspects.map((s) => s.split(':')[0]).join(',');
    if (held === this.held) return;
    this.held = held;
    if (held) log.info('rebalancing held: suspect nodes', { controller: this.membership.info.id, suspects });
    else log.info('rebalancing resumed', { controller: this.membership.info.id });
  }

  /**
   * Applies a round's writes in transactions of up to WRITES_PER_TXN entries (a node's loss
   * promotes its shards in one or two etcd round trips, not one per shard). Each transaction
   * compares the term and every entry's mod_revision; if any entry changed under it, its writes
   * are retried one by one, so only the stale ones are dropped (the next round sees them anew).
   */
  private async apply(plan: PlacementWrite[]): Promise<PlacementWrite[]> {
    const applied: PlacementWrite[] = [];
    const commit = async (batch: PlacementWrite[]): Promise<boolean> => {
      if (this.term === null || !this.membership.mayServe()) return false;
      let txn = this.client.if(this.keys.controller, 'Create', '==', this.term);
      for (const w of batch) txn = txn.and(this.keys.placementOf(w.shard), 'Mod', '==', w.expected);
      const res = await txn
        .then(...batch.map((w) => this.client.put(this.keys.placementOf(w.shard)).value(encodePlacement(w.next))))
        .commit()
        .catch(() => null);
      if (!res?.succeeded) return false;
      for (const w of batch) {
        this.writes[w.reason]++;
        applied.push(w);
      }
      this.writtenRevision = Math.max(this.writtenRevision, Number(res.header.revision));
      return true;
    };
    const batches: PlacementWrite[][] = [];
    for (let i = 0; i < plan.length; i += WRITES_PER_TXN) batches.push(plan.slice(i, i + WRITES_PER_TXN));
    await Promise.all(
      batches.map(async (batch) => {
        if ((await commit(batch)) || batch.length === 1) return;
        for (const w of batch) await commit([w]);
      }),
    );
    return applied;
  }
}

function countByReason(writes: PlacementWrite[]): Partial<WriteCounts> {
  const out: Partial<WriteCounts> = {};
  for (const w of writes) out[w.reason] = (out[w.reason] ?? 0) + 1;
  return out;
}

const isMove = (reason: WriteReason): boolean => reason === 'move-follow' || reason === 'move-flip' || reason === 'follow' || reason === 'trim';
