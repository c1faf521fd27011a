import { BroadcastChannel } from 'node:worker_threads';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import { coalesced } from '../../coalesced.js';
import { log } from '../../log.js';
import type { Storage } from '../../storage/database.js';
import { applyWriteSet } from '../../storage/apply-write-set.js';
import { ApplyBatch } from './apply-batch.js';
import { decodeWriteSet } from '../../storage/write-set-codec.js';
import type { PlacementView } from '../placement.js';
import type { ShardLog } from '../shard-log.js';
import { APPEND_CHANNEL, SERVING_CHANNEL, ackChannel, type AppendReply, type AppendRequest, type ServingMessage } from './replica-channels.js';
import type { ReplicaRole, ShardReport } from './replica-report.js';
import { ShardReplica, type ReplicaContext } from './shard-replica.js';
import { ActivationQueue, ActivationUrgency } from './activation-queue.js';
import { syncToDisk } from '../../storage/replica-position.js';

/** Shards catching up and fencing at once: more only queue up in the log's engine and slow the lease's keepalives. */
const ACTIVATIONS_AT_ONCE = 16;
/** Shards copied from peers at once: each is a stream and a file, and a joining node has many. */
const SEEDS_AT_ONCE = 2;

export interface NodeReplicaOptions {
  /** The node's storage as opened, NOT the recording view: applying the log must not be logged again. */
  storage: Storage;
  log: ShardLog;
  view: PlacementView;
  /** How long an append of unknown outcome is retried before the shard demotes (ms). */
  unknownDeadlineMs: number;
  /** Replaces the local copy of a shard with a peer's; resolves to its log sequence (shard-seeder.ts). */
  seed(shard: number): Promise<number>;
  /** Entries an owner appends between two trims of a shard's log (0: it never trims). */
  trimEvery: number;
  /** Called when a shard stops or starts being active here: the front end's cached reads are dropped. */
  onActiveChange(shard: number, active: boolean): void;
  appended(ms: number): void;
  refused(): void;
}

/**
 * Every shard's replica on this node, on the main thread: the placement view gives each its role,
 * the threads' committed write sets arrive over APPEND_CHANNEL and are answered once in the log,
 * and every change of which shards are active is broadcast to the threads (SERVING_CHANNEL) and
 * kept here for the front end, which serves a shard only while it is active.
 */
export class NodeReplicas {
  private readonly replicas: ShardReplica[];
  private readonly append = new BroadcastChannel(APPEND_CHANNEL);
  private readonly serving = new BroadcastChannel(SERVING_CHANNEL);
  private readonly acks = new Map<number, BroadcastChannel>();
  private readonly wasActive = new Uint8Array(SHARD_COUNT);
  private unsubscribe: (() => void) | null = null;
  private syncing: Promise<void> = Promise.resolve();
  /** Several shards change together (a placement update): one broadcast for them. */
  private readonly broadcastSoon = coalesced(queueMicrotask, () => this.broadcast());
  /**
   * Set as `close` begins: replicas closing change what is served, and appends in flight settle,
   * after the channels are closed; a message posted on a closed channel throws, uncaught, and
   * would end the process.
   */
  private closed = false;
  private readonly activations = new ActivationQueue(ACTIVATIONS_AT_ONCE);
  private readonly seeds = new ActivationQueue(SEEDS_AT_ONCE);

  constructor(private readonly options: NodeReplicaOptions) {
    const ctx: ReplicaContext = {
      storage: options.storage,
      log: options.log,
      nodeId: options.view.localNodeId,
      applyWriteSet: (storage, bytes) => applyWriteSet(storage, decodeWriteSet(bytes)),
      applyBatch: new ApplyBatch(options.storage),
      unknownDeadlineMs: options.unknownDeadlineMs,
      gapDeadlineMs: 2000,
      changed: (replica) => this.changed(replica),
      seed: (shard) => this.seeds.run(shard, ActivationUrgency.Placed, () => options.seed(shard)),
      limit: (shard, urgency, step) => this.activations.run(shard, urgency, step),
      appended: (ms) => options.appended(ms),
      refused: () => options.refused(),
    };
    this.replicas = Array.from({ length: SHARD_COUNT }, (_, shard) => new ShardReplica(shard, ctx));
  }

  start(): void {
    this.append.onmessage = (event) => this.onAppend((event as { data: AppendRequest }).data);
    this.serving.onmessage = (event) => {
      if ((event as { data: ServingMessage }).data.type === 'hello') this.broadcast();
    };
    this.unsubscribe = this.options.view.onChange((shards) => this.assign(shards));
    this.assign(this.replicas.map((r) => r.shard));
    this.broadcast();
  }

  /** Whether this node's copy of the shard is the active owner's: the front end may serve it. */
  active(shard: number): boolean {
    return this.replicas[shard]!.serving;
  }

  /** The shard's activation while it is served here, 0 when it is not (ShardReplica.activation). */
  activation(shard: number): number {
    return this.replicas[shard]!.activation;
  }

  /** Whether the log holds the shard's commits up to `commit` of `activation` (ShardReplica.acknowledged). */
  acknowledged(shard: number, activation: number, commit: number): boolean | Promise<boolean> {
    return this.replicas[shard]!.acknowledged(activation, commit);
  }

  /** A request is waiting for the shard: if its activation is queued here, it goes first. */
  demand(shard: number): void {
    this.activations.demand(shard);
  }

  reports(): ShardReport[] {
    return this.replicas.map((r) => r.report());
  }

  /**
   * The reports, with every position in them on disk (LMDB is synced after reading them): what
   * the node reports as applied, an owner may trim its log up to.
   */
  async durableReports(): Promise<ShardReport[]> {
    const reports = this.reports();
    const synced = syncToDisk(this.options.storage);
    this.syncing = synced.catch(() => undefined);
    await synced;
    return reports;
  }

  /**
   * Settles once no disk sync runs (or after `ms`): a process that exits while LMDB syncs on
   * another thread is aborted by lmdb-js (SIGABRT) instead of leaving with its exit code.
   */
  syncSettled(ms: number): Promise<void> {
    return Promise.race([this.syncing, new Promise<void>((r) => setTimeout(r, ms).unref())]);
  }

  /**
   * Each shard active here trims its log once it appended `trimEvery` entries since its last
   * trim, up to `floor(shard)`: the lowest position every other copy placed reports durable (null
   * while one has not reported; log-trim.ts). A few shards at a time.
   */
  async trimLogs(floor: (shard: number) => number | null): Promise<void> {
    if (this.options.trimEvery === 0) return;
    const owned = this.replicas.filter((r) => r.serving);
    for (let i = 0; i < owned.length; i += 16) {
      await Promise.all(
        owned.slice(i, i + 16).map(async (r) => {
          const upTo = floor(r.shard);
          if (upTo === null) return;
          await r.trimLog(upTo, this.options.trimEvery).catch((err: unknown) => log.warn('shard log not trimmed', { shard: r.shard, err }));
        }),
      );
    }
  }

  /** Followers read their log's last sequence (for their lag), a few at a time. */
  async probe(): Promise<void> {
    const followers = this.replicas.filter((r) => r.state === 'follower');
    for (let i = 0; i < followers.length; i += 16) {
      await Promise.all(followers.slice(i, i + 16).map((r) => r.probe().catch(() => undefined)));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    await Promise.all(this.replicas.map((r) => r.close()));
    for (const channel of [this.append, this.serving, ...this.acks.values()]) channel.close();
    await this.options.log.close();
  }

  private role(shard: number): { role: ReplicaRole; epoch: number } {
    const placement = this.options.view.shard(shard);
    const me = this.options.view.localNodeId;
    const role = placement?.owner === me ? 'owner' : placement?.followers.includes(me) ? 'follower' : 'none';
    return { role, epoch: placement?.epoch ?? 0 };
  }

  private assign(shards: number[]): void {
    for (const shard of shards) {
      const { role, epoch } = this.role(shard);
      this.replicas[shard]!.assign(role, epoch);
    }
  }

  private onAppend(request: AppendRequest): void {
    const barriers = request.barrier.map((shard) =>
      this.replicas[shard]!.settled().then(
        () => -1,
        () => shard,
      ),
    );
    const reads = (request.through ?? []).map(({ shard, commit }) =>
      Promise.resolve(this.acknowledged(shard, this.activation(shard), commit)).then((ok) => (ok ? -1 : shard)),
    );
    void Promise.all([
      ...barriers,
      ...reads,
      ...request.sets.map((set) =>
        this.replicas[set.shard]!.committed(set.commit, set.bytes).then(
          () => -1,
          (err: unknown) => {
            log.warn('write set not replicated: its commands are answered 503', { shard: set.shard, commit: set.commit, err });
            return set.shard;
          },
        ),
      ),
    ]).then((shards) => {
      if (this.closed) return;
      let channel = this.acks.get(request.thread);
      if (!channel) this.acks.set(request.thread, (channel = new BroadcastChannel(ackChannel(request.thread))));
      channel.postMessage({ id: request.id, refused: shards.filter((s) => s >= 0) } satisfies AppendReply);
    });
  }

  private changed(replica: ShardReplica): void {
    const active = replica.serving ? 1 : 0;
    if (this.wasActive[replica.shard] !== active) this.options.onActiveChange(replica.shard, active === 1);
    this.wasActive[replica.shard] = active;
    this.broadcastSoon();
  }

  private broadcast(): void {
    if (this.closed) return;
    const flags = new Uint8Array(SHARD_COUNT);
    for (const r of this.replicas) flags[r.shard] = r.serving ? 1 : 0;
    this.serving.postMessage({ type: 'serving', flags } satisfies ServingMessage);
  }
}
