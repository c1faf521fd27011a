import { performance } from 'node:perf_hooks';
import { ShardLogFenced, ShardLogUnavailable, type ShardLog } from '../shard-log.js';
import { encodeLogRecord } from './log-record.js';

/** Why an owner's append did not land: refused (a newer owner appended) or never confirmed. */
export class AppendFailed extends Error {
  constructor(
    readonly reason: 'fenced' | 'unknown',
    message: string,
  ) {
    super(message);
  }
}

interface Waiter {
  resolve(): void;
  reject(err: AppendFailed): void;
}

/** A submitted write set (null: a barrier) waiting for its record. */
interface Queued {
  writeSet: Uint8Array | null;
  tag: number;
  waiter: Waiter;
}

/**
 * The most write-set bytes merged into one record. Above it the sets go in the next records: a
 * log takes records of a bounded size (etcd refuses a request above 1.5 MiB by default), and one
 * staged 1 MiB chunk per record must still fit. A single larger set still goes alone, in
 * pieces if the engine needs it (piece-log.ts).
 */
export const MAX_MERGED_BYTES = 1024 * 1024 + 64 * 1024;

export interface AppenderOptions {
  log: ShardLog;
  shard: number;
  epoch: number;
  /** `node:epoch`: with a counter, the id of each append, so a retried one is recognised. */
  idPrefix: string;
  /** The shard's last sequence when this owner activated (its epoch record's). */
  lastSeq: number;
  /** How long an append of unknown outcome is retried before the shard gives up (demotes). */
  unknownDeadlineMs: number;
  /** After each acknowledged record: its sequence, the last tag it holds, and its latency. */
  onAck(seq: number, tag: number, ms: number): void;
}

/**
 * The owner's appends for one shard: at most one record in flight, because the next conditional
 * append needs the sequence the log gives this one. Write sets of batches that commit while a
 * record is in flight are merged into the next record, so a hot shard costs one log round trip
 * per record, not per batch (group commit at the log level), up to `MAX_MERGED_BYTES` a record.
 *
 * A refused append means a newer owner appended first: the pending batches are lost to the log
 * (their local copy is divergent). An append of unknown outcome (timeout, connection) or one the
 * log could not take is sent again with the same id, which the log resolves to the first copy if
 * that landed — until `unknownDeadlineMs`, after which the entry after our last sequence is read
 * one last time and, if it cannot be read, the shard gives up with the outcome unknown.
 */
export class ShardAppender {
  private pending: Queued[] = [];
  private lastTag = 0;
  private inFlight: Waiter[] | null = null;
  private failure: AppendFailed | null = null;
  private count = 0;
  private running = false;
  lastSeq: number;
  /** Appends retried after an unknown outcome (metrics). */
  unknownOutcomes = 0;

  constructor(private readonly options: AppenderOptions) {
    this.lastSeq = options.lastSeq;
  }

  get failed(): AppendFailed | null {
    return this.failure;
  }

  /**
   * Queues a committed write set, tagged (the shard's commit number); settles when the record
   * holding it is acknowledged.
   */
  submit(writeSet: Uint8Array, tag: number): Promise<void> {
    this.lastTag = tag;
    return this.enqueue(writeSet);
  }

  /** Settles when everything submitted so far is acknowledged (or failed). */
  barrier(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending.length > 0) return this.enqueue(null);
    if (this.inFlight) {
      const inFlight = this.inFlight;
      return new Promise((resolve, reject) => inFlight.push({ resolve, reject }));
    }
    return Promise.resolve();
  }

  private enqueue(writeSet: Uint8Array | null): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push({ writeSet, tag: this.lastTag, waiter: { resolve, reject } });
      if (!this.running) void this.run();
    });
  }

  /** The queued sets the next record holds: in order, up to `MAX_MERGED_BYTES` (at least one). */
  private takeRecord(): { writeSets: Uint8Array[]; tag: number; waiters: Waiter[] } {
    const writeSets: Uint8Array[] = [];
    let bytes = 0;
    let taken = 0;
    for (const { writeSet } of this.pending) {
      if (writeSet) {
        if (writeSets.length > 0 && bytes + writeSet.length > MAX_MERGED_BYTES) break;
        writeSets.push(writeSet);
        bytes += writeSet.length;
      }
      taken++;
    }
    const queued = this.pending.splice(0, taken);
    return { writeSets, tag: queued[queued.length - 1]!.tag, waiters: queued.map((q) => q.waiter) };
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.pending.length > 0 && !this.failure) {
      const { writeSets, tag, waiters } = this.takeRecord();
      if (writeSets.length === 0) {
        for (const w of waiters) w.resolve();
        continue;
      }
      this.inFlight = waiters;
      const id = `${this.options.idPrefix}:${++this.count}`;
      const record = encodeLogRecord({ epoch: this.options.epoch, writeSets });
      const started = performance.now();
      try {
        this.lastSeq = await this.append(id, record);
        this.inFlight = null;
        this.options.onAck(this.lastSeq, tag, performance.now() - started);
        for (const w of waiters) w.resolve();
      } catch (err) {
        this.inFlight = null;
        this.failure = err instanceof AppendFailed ? err : new AppendFailed('unknown', String(err));
        for (const w of [...waiters, ...this.pending.map((q) => q.waiter)]) w.reject(this.failure);
        this.pending = [];
      }
    }
    this.running = false;
  }

  private async append(id: string, record: Uint8Array): Promise<number> {
    const { log, shard, unknownDeadlineMs } = this.options;
    const deadline = performance.now() + unknownDeadlineMs;
    for (let wait = 25; ; wait = Math.min(wait * 2, 500)) {
      try {
        return await log.append(shard, this.lastSeq, id, record);
      } catch (err) {
        if (err instanceof ShardLogFenced) throw new AppendFailed('fenced', err.message);
        if (performance.now() > deadline) return this.settle(id, err);
        if (!(err instanceof ShardLogUnavailable)) this.unknownOutcomes++;
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** The last word on an append that kept failing: landed iff the entry after lastSeq is ours. */
  private async settle(id: string, cause: unknown): Promise<number> {
    const { log, shard } = this.options;
    let next;
    try {
      next = await log.read(shard, this.lastSeq, 1);
    } catch {
      throw new AppendFailed('unknown', `shard ${shard}: the log did not confirm an append (${String(cause)})`);
    }
    if (next[0]?.id === id) return next[0].seq;
    if (next.length > 0) throw new AppendFailed('fenced', `shard ${shard}: another writer appended after sequence ${this.lastSeq}`);
    // Nothing after our last sequence: the record is not in the log, and cannot land later only
    // if no attempt is still on its way; treat the shard's outcome as unknown (it is rebuilt).
    throw new AppendFailed('unknown', `shard ${shard}: the log did not take an append (${String(cause)})`);
  }
}
