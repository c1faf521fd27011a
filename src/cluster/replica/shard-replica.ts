import { log } from '../../log.js';
import type { Storage } from '../../storage/database.js';
import { applyLogEntries, dropShardData, markAcknowledged, readReplicaPosition } from '../../storage/replica-position.js';
import { ShardLogFenced, ShardLogTrimmed, type ShardLog, type ShardLogEntry, type ShardLogTail } from '../shard-log.js';
import { decodeLogRecord, encodeLogRecord } from './log-record.js';
import { ActivationUrgency } from './activation-queue.js';
import type { ApplyBatch } from './apply-batch.js';
import { ShardAppender } from './shard-appender.js';
import type { ReplicaRole, ShardReport, ReplicaState } from './replica-report.js';

/** How long stopping a tail is waited for before the replica goes on without it. */
const TAIL_STOP_WAIT_MS = 2000;

/** What every shard replica of a node shares. */
export interface ReplicaContext {
  storage: Storage;
  log: ShardLog;
  nodeId: string;
  /** Applies one write set (storage's codec), inside the caller's transaction. */
  applyWriteSet: (storage: Storage, writeSet: Uint8Array) => void;
  /** Where a follower's deliveries are applied, together with the other shards' (apply-batch.ts). */
  applyBatch: ApplyBatch;
  /** How long an append of unknown outcome is retried before the shard demotes. */
  unknownDeadlineMs: number;
  /** How long a commit number may be missing (its thread died before handing it over). */
  gapDeadlineMs: number;
  /** Called after every change of state (the front end stops or starts serving the shard). */
  changed(replica: ShardReplica): void;
  /**
   * Replaces the local copy of the shard with a peer's (the log no longer holds what it misses):
   * resolves to the log sequence the copy reflects (shard-seeder.ts).
   */
  seed(shard: number): Promise<number>;
  /** Runs a catch-up step within the node's limit of concurrent ones (a node starting or taking over many shards), most urgent first. */
  limit<T>(shard: number, urgency: ActivationUrgency, step: () => Promise<T>): Promise<T>;
  /** An acknowledged append's latency; an append that failed (refused or never confirmed). */
  appended(ms: number): void;
  refused(): void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A read waiting for the log to acknowledge the shard's commits up to `commit` (acknowledged-reads.ts). */
interface AckWaiter {
  commit: number;
  done(acknowledged: boolean): void;
}

/**
 * One shard on one node: the state machine that makes it a follower, an active owner, or
 * neither, as the placement says.
 *
 *   idle ─► follower (tails the log into LMDB) ─► catching-up ─► active (serves, appends)
 *   active ─► demoted (placement moved: in-flight appends finish) ─► follower / idle
 *   active ─► divergent (an append was refused or never confirmed; the local copy holds a batch
 *             the log does not) ─► rebuilt from the log ─► follower / catching-up
 *   follower / catching-up ─► seeding (the log was trimmed past the local copy: a peer's copy
 *             replaces it) ─► idle ─► follower / catching-up
 *
 * An owner becomes active only after it has applied the whole log and appended its epoch record
 * conditionally on the last sequence it read: from then, the previous owner's appends are refused.
 * Commits reach an active owner from any thread of the node, numbered by the shard's commit
 * count; they are appended in that order, so a set that arrives early waits for the missing
 * number. A commit made here while the shard is not active (or one whose number never arrives)
 * is in the local data but not in the log: the copy is divergent.
 */
export class ShardReplica {
  state: ReplicaState = 'idle';
  role: ReplicaRole = 'none';
  epoch = 0;
  applied: number;
  moves = 0;
  /** The log's last sequence when a follower last looked (probe). */
  private logLast = 0;
  private appender: ShardAppender | null = null;
  /** Sets that arrived ahead of a missing commit number, by number. */
  private readonly early = new Map<number, { bytes: Uint8Array; done: { resolve: () => void; reject: (err: unknown) => void }; settled: Promise<void> }>();
  private nextCommit = 0;
  private gapTimer: NodeJS.Timeout | null = null;
  /** A commit was made here that the log will never have. */
  private stray = false;
  private tail: ShardLogTail | null = null;
  private target: { role: ReplicaRole; epoch: number } = { role: 'none', epoch: 0 };
  private driving = false;
  private closed = false;
  /** The log no longer holds the entries after `applied`: only a peer's copy can bring this one up. */
  private behindLog = false;
  /** As the active owner: entries appended since it last trimmed the log, and where it trimmed to. */
  private appendedSinceTrim = 0;
  private trimmedTo = 0;
  /** The highest commit number the log acknowledged in the current (or last) activation. */
  private ackedCommit = 0;
  /** Raised when the local copy is dropped or replaced: a position queued before is not written. */
  private dataGeneration = 0;
  /** The activation (`moves`) whose copy was given up with commits the log never took. */
  private lostActivation = 0;
  private ackWaiters: AckWaiter[] = [];

  constructor(
    readonly shard: number,
    private readonly ctx: ReplicaContext,
  ) {
    const position = readReplicaPosition(ctx.storage, shard);
    this.applied = position.seq;
    // A batch committed here but never confirmed by the log (a crash between the two).
    if (position.dirty) this.state = 'divergent';
  }

  /** What the placement wants of this node for the shard. */
  assign(role: ReplicaRole, epoch: number): void {
    if (role === this.target.role && epoch === this.target.epoch) return;
    this.target = { role, epoch };
    this.kick();
  }

  /** Whether this node may run the shard's commands now. */
  get serving(): boolean {
    return this.state === 'active' && !this.appender?.failed && !this.stray;
  }

  /** The number of this activation while the shard is served here, 0 when it is not. */
  get activation(): number {
    return this.serving ? this.moves : 0;
  }

  /**
   * Whether the log holds the shard's commits up to `commit`, made in activation `activation`:
   * true, false when some never will be (the activation is over, or its copy was given up), or
   * a promise of the answer once the appends in flight settle (false after `unknownDeadlineMs`:
   * a commit number that never reaches the replica, its thread having died).
   */
  acknowledged(activation: number, commit: number): boolean | Promise<boolean> {
    if (activation !== this.moves || activation === this.lostActivation || this.appender?.failed || this.stray) return false;
    if (commit <= this.ackedCommit) return true;
    if (!this.appender) return false;
    return new Promise((resolve) => {
      const timer = setTimeout(() => waiter.done(false), this.ctx.unknownDeadlineMs).unref();
      const waiter: AckWaiter = {
        commit,
        done: (acknowledged) => {
          clearTimeout(timer);
          this.ackWaiters = this.ackWaiters.filter((w) => w !== waiter);
          resolve(acknowledged);
        },
      };
      this.ackWaiters.push(waiter);
    });
  }

  /** Answers the waiting reads the acknowledgements so far cover, or all of them with `false`. */
  private releaseAckWaiters(end: boolean): void {
    for (const w of this.ackWaiters) if (end || w.commit <= this.ackedCommit) w.done(!end);
  }

  /**
   * A write set committed on this node (commit number `commit`): settles once it is in the log,
   * rejects when it will never be.
   */
  committed(commit: number, bytes: Uint8Array): Promise<void> {
    if (!this.serving || commit < this.nextCommit) {
      this.stray = true;
      this.kick();
      return Promise.reject(new Error(`shard ${this.shard}: commit ${commit} made while not the active owner`));
    }
    let done!: { resolve: () => void; reject: (err: unknown) => void };
    const settled = new Promise<void>((resolve, reject) => (done = { resolve, reject }));
    this.early.set(commit, { bytes, done, settled });
    this.submitInOrder();
    return settled;
  }

  /** Settles when every set submitted so far is in the log; rejects if one never will be. */
  settled(): Promise<void> {
    const waiting = [...this.early.values()].map((e) => e.settled);
    return Promise.all([...waiting, this.appender ? this.appender.barrier() : undefined]).then(() => undefined);
  }

  private submitInOrder(): void {
    for (let next = this.early.get(this.nextCommit); next; next = this.early.get(this.nextCommit)) {
      this.early.delete(this.nextCommit);
      const { resolve, reject } = next.done;
      this.watch(this.appender!.submit(next.bytes, this.nextCommit)).then(resolve, reject);
      this.nextCommit++;
    }
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = null;
    if (this.early.size > 0) {
      this.gapTimer = setTimeout(() => {
        this.stray = true;
        this.kick();
      }, this.ctx.gapDeadlineMs);
      this.gapTimer.unref();
    }
  }

  /** Rejects the sets waiting for a missing commit number: committed here, never in the log. */
  private dropEarly(): void {
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = null;
    if (this.early.size > 0) this.stray = true;
    for (const { done } of this.early.values()) done.reject(new Error(`shard ${this.shard}: a commit before this one never reached the log`));
    this.early.clear();
  }

  report(): ShardReport {
    return {
      shard: this.shard,
      state: this.state,
      role: this.target.role,
      epoch: this.epoch,
      applied: this.appender ? this.appender.lastSeq : this.applied,
      // A copy the log cannot bring up is as far behind as can be: the controller must not hand it the shard.
      lag: this.behindLog || this.state === 'seeding' ? Number.MAX_SAFE_INTEGER : this.state === 'follower' ? Math.max(0, this.logLast - this.applied) : 0,
      moves: this.moves,
      trimmedTo: this.trimmedTo,
    };
  }

  /**
   * The active owner's side of trimming (log-trim.ts has the rule): once it has appended
   * `every` entries since its last trim, drops the log's entries up to `floor` (capped at its own
   * last append; the log keeps its last entry anyway).
   */
  async trimLog(floor: number, every: number): Promise<void> {
    if (!this.serving || this.appendedSinceTrim < every) return;
    const upTo = Math.min(floor, this.appender!.lastSeq);
    if (upTo <= this.trimmedTo) return;
    await this.ctx.log.trim(this.shard, upTo);
    this.trimmedTo = upTo;
    this.appendedSinceTrim = 0;
  }

  /** A follower reads the log's last sequence, for its lag. */
  async probe(): Promise<void> {
    if (this.state === 'follower') this.logLast = await this.ctx.log.last(this.shard);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.kick();
    await this.appender?.barrier().catch(() => undefined);
    await this.tail?.stop();
  }

  private watch(p: Promise<void>): Promise<void> {
    // A failed append changes the state; the replies still see the failure.
    p.catch(() => this.kick());
    return p;
  }

  private set(state: ReplicaState): void {
    if (this.state === state) return;
    this.state = state;
    this.ctx.changed(this);
  }

  /** Runs the state machine unless it runs already (its loop reads the target after every step). */
  private kick(): void {
    if (!this.driving) void this.drive();
  }

  /** Moves the state toward the target, one step at a time, until they agree. */
  private async drive(): Promise<void> {
    this.driving = true;
    try {
      while (!this.closed) {
        const target = this.target;
        if (this.state === 'active' || this.state === 'demoted') {
          if (this.stray) await this.appender!.barrier().catch(() => undefined);
          if (this.appender!.failed || this.stray) {
            if (this.appender!.failed) this.ctx.refused();
            this.lostActivation = this.moves;
            this.appender = null;
            this.releaseAckWaiters(true);
            this.dropEarly();
            this.set('divergent');
            continue;
          }
          if (target.role === 'owner' && target.epoch === this.epoch) break;
          await this.demote();
          continue;
        }
        if (this.stray && this.state !== 'divergent') {
          await this.stopTail();
          this.set('divergent');
          continue;
        }
        if (this.state === 'divergent') {
          // Its data is worth nothing now, whatever the placement: drop it (a shard placed here
          // then rebuilds from the log).
          await this.rebuild();
          continue;
        }
        if (this.behindLog && target.role !== 'none') {
          await this.seed();
          continue;
        }
        if (target.role === 'owner') {
          // A follower promoted (its owner failed) is current and its clients are retrying.
          const urgency = this.state === 'follower' ? ActivationUrgency.Promoted : ActivationUrgency.Placed;
          // Not waited for: a tail that is no longer the current one applies nothing, and an
          // engine slow to cancel a watch (up to TAIL_STOP_WAIT_MS) would delay the failover.
          void this.stopTail();
          await this.ctx.limit(this.shard, urgency, () => this.activate(target.epoch));
          continue;
        }
        if (target.role === 'follower') {
          if (this.state !== 'follower') this.follow();
          break;
        }
        await this.stopTail();
        this.set('idle');
        break;
      }
    } catch (err) {
      // A log trimmed past this copy: the next step seeds it from a peer.
      if (err instanceof ShardLogTrimmed) this.behindLog = true;
      // A log that cannot be reached, or no peer that could send a copy: try again shortly (the
      // state already says what holds).
      else log.warn('shard replica step failed', { shard: this.shard, state: this.state, err });
      this.ctx.changed(this);
      if (!this.closed) setTimeout(() => this.kick(), 500).unref();
    } finally {
      this.driving = false;
    }
  }

  /** Stops taking commands, lets in-flight appends land (or be refused), keeps the position. */
  private async demote(): Promise<void> {
    this.set('demoted');
    this.dropEarly();
    await this.appender!.barrier().catch(() => undefined);
    if (this.appender!.failed) return; // the loop marks it divergent
    this.applied = this.appender!.lastSeq;
    this.appender = null;
    this.releaseAckWaiters(true);
    this.set('idle');
  }

  /** Drops the shard's data and position: the log (from its start, or after a peer's copy) rebuilds it. */
  private async rebuild(): Promise<void> {
    this.dataGeneration++;
    await this.stopTail();
    await dropShardData(this.ctx.storage, this.shard);
    this.applied = 0;
    this.stray = false;
    this.set('idle');
  }

  /**
   * Replaces the local copy with a peer's, which reflects the log up to some sequence; the log
   * is read after it. Until the copy is whole the shard's data is marked as importing (a crash
   * leaves it divergent, to be cleared and seeded again).
   */
  private async seed(): Promise<void> {
    this.dataGeneration++;
    await this.stopTail();
    this.set('seeding');
    this.applied = 0;
    this.applied = await this.ctx.seed(this.shard);
    this.behindLog = false;
    this.set('idle');
  }

  /** Catch up, fence with an epoch record, serve. Retries while the old owner still appends. */
  private async activate(epoch: number): Promise<void> {
    this.set('catching-up');
    let refused = false;
    for (;;) {
      if (this.target.role !== 'owner' || this.target.epoch !== epoch || this.closed) return;
      await this.catchUp();
      const expected = refused ? await this.validEnd() : this.applied;
      if (expected === null) continue;
      const record = encodeLogRecord({ epoch, writeSets: [] });
      let seq: number;
      try {
        // Ids are unique per shard and activation: JetStream deduplicates ids per stream (shared
        // by many shards) and may remember those of an earlier run of this node.
        seq = await this.ctx.log.append(this.shard, expected, `${this.ctx.nodeId}:${this.shard}:${epoch}:after:${expected}`, record);
      } catch (err) {
        if (!(err instanceof ShardLogFenced)) throw err;
        // More was appended (read it too), or the log ends in entries that are not valid.
        refused = true;
        continue;
      }
      const { commits } = readReplicaPosition(this.ctx.storage, this.shard);
      markAcknowledged(this.ctx.storage, this.shard, { seq, epoch, commit: commits });
      this.applied = seq;
      this.epoch = epoch;
      this.nextCommit = commits + 1;
      this.ackedCommit = commits;
      this.appender = new ShardAppender({
        log: this.ctx.log,
        shard: this.shard,
        epoch,
        idPrefix: `${this.ctx.nodeId}:${this.shard}:${epoch}:${seq}`,
        lastSeq: seq,
        unknownDeadlineMs: this.ctx.unknownDeadlineMs,
        onAck: (acked, commit, ms) => {
          // With the node's other local writes of this turn (apply-batch.ts); not once the data
          // it describes has been dropped meanwhile.
          const generation = this.dataGeneration;
          this.ctx.applyBatch
            .run(() => {
              if (this.dataGeneration === generation) markAcknowledged(this.ctx.storage, this.shard, { seq: acked, epoch, commit });
            })
            .catch((err: unknown) => log.warn('acknowledged position not written', { shard: this.shard, err }));
          this.ackedCommit = commit;
          this.releaseAckWaiters(false);
          this.appendedSinceTrim++;
          this.ctx.appended(ms);
        },
      });
      this.moves++;
      this.set('active');
      return;
    }
  }

  /**
   * The sequence an epoch record must follow: the log's last stored entry. It is past `applied`
   * when the log ends in entries that are not valid (JetStream may store an append whose condition
   * failed, and readers skip it); expecting `applied` would then be refused forever. Null when a
   * valid entry arrived meanwhile: it must be applied first. The read after `last` sees every
   * valid entry up to it, so nothing valid is stepped over.
   */
  private async validEnd(): Promise<number | null> {
    const last = await this.ctx.log.last(this.shard);
    if (last <= this.applied) return this.applied;
    const entries = await this.readAfter(this.applied);
    if (entries.length === 0) return last;
    this.apply(entries);
    return null;
  }

  /** Reads and applies the log after `applied` until there is nothing more. */
  private async catchUp(): Promise<void> {
    for (;;) {
      const entries = await this.readAfter(this.applied);
      if (entries.length === 0) return;
      this.apply(entries);
    }
  }

  /** Throws `ShardLogTrimmed` when the log no longer holds the entry after `after` (the copy is seeded then). */
  private readAfter(after: number): Promise<ShardLogEntry[]> {
    return this.ctx.log.read(this.shard, after, 512);
  }

  private apply(entries: ShardLogEntry[]): void {
    const decoded = entries.map((e) => ({ seq: e.seq, ...decodeLogRecord(e.record) }));
    applyLogEntries(this.ctx.storage, this.shard, decoded, this.ctx.applyWriteSet);
    this.applied = entries[entries.length - 1]!.seq;
  }

  private follow(): void {
    this.set('follower');
    const tail: ShardLogTail = this.ctx.log.tail(this.shard, this.applied, (entries) => {
      // A tail given up on (stopTail) may still deliver: only the current one applies, and only
      // what is not applied yet.
      if (this.tail !== tail) return Promise.resolve();
      return this.ctx.applyBatch.run(() => {
        // Checked again when the batch runs: the tail may have been given up on meanwhile.
        const fresh = this.tail === tail ? entries.filter((e) => e.seq > this.applied) : [];
        if (fresh.length > 0) this.apply(fresh);
      });
    });
    this.tail = tail;
    tail.done.then(
      () => undefined,
      async (err: unknown) => {
        if (this.tail !== tail) return;
        this.tail = null;
        // A trimmed gap: seed from a peer. A failed apply: start over from what is applied, after a pause.
        if (err instanceof ShardLogTrimmed) this.behindLog = true;
        else await sleep(500);
        if (this.state === 'follower') this.set('idle');
        this.kick();
      },
    );
  }

  /**
   * Stops following. A stop that does not finish soon (an engine slow to cancel a watch) is not
   * waited for: the tail no longer applies anything once it is not the current one.
   */
  private async stopTail(): Promise<void> {
    const tail = this.tail;
    this.tail = null;
    if (!tail) return;
    await Promise.race([tail.stop().catch(() => undefined), new Promise((r) => setTimeout(r, TAIL_STOP_WAIT_MS).unref())]);
  }
}
