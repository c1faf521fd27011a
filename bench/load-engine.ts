/**
 * The generator's two loops over a fixed set of slots (one connection each, one request in flight
 * per connection).
 *
 * - Closed loop: every slot sends, waits, sends again. Measures maximum throughput; latency is
 *   from send to last byte.
 * - Open loop: arrivals at a fixed rate, arrival i intended at start + i/rate, handed to the next
 *   free slot (FIFO queue when none is free); during the warm-up the rate ramps up to the target. Latency is measured from the *intended* time, so a
 *   stall shows as queueing delay instead of silently lowering the send rate (coordinated
 *   omission). The service time from the actual send is kept beside it for comparison.
 *
 * Only requests whose (intended) start falls in the window after warm-up are measured; errors are
 * counted in every part of the run.
 */
import { performance } from 'node:perf_hooks';
import type { GeneratorJob, GeneratorResult, KindOutcome } from './generator-protocol.js';
import { createHistogram, encodeHistogram } from './histogram.js';
import type { Histogram } from './histogram.js';
import { HttpConnection } from './http-connection.js';
import type { HttpResponse } from './http-connection.js';
import type { PreparedRequest, Workload } from './workloads.js';

export interface ProgressSample {
  elapsedMs: number;
  totalMs: number;
  completed: number;
  rate: number;
}

const MAX_ERROR_SAMPLES = 5;
const PROGRESS_INTERVAL_MS = 250;

interface KindStats {
  requests: number;
  errors: number;
  latency: Histogram;
}

export class LoadEngine {
  private readonly connections: HttpConnection[];
  private readonly latency = createHistogram();
  private readonly service: Histogram | null;
  private readonly kinds = new Map<string, KindStats>();
  private readonly errorsByStatus: Record<string, number> = {};
  private readonly errorSamples: string[] = [];
  private errors = 0;
  private measured = 0;
  private completedTotal = 0;
  private inFlight = 0;
  private start = 0;
  private measureStart = 0;
  private end = 0;
  /** Drain deadline passed: no more sends. */
  private stopped = false;
  /** `stop()` arrived, possibly before the connections were open. */
  private stopRequested = false;
  // Open loop state.
  private readonly interval: number;
  private nextArrival = 0;
  private readonly queue: number[] = [];
  private queueHead = 0;
  private readonly freeSlots: number[] = [];
  private timer: NodeJS.Timeout | null = null;
  private finish: (() => void) | null = null;

  constructor(
    private readonly job: GeneratorJob,
    private readonly workload: Workload,
    private readonly onProgress: (p: ProgressSample) => void,
    private readonly onStart: () => void = () => {},
  ) {
    this.connections = Array.from(
      { length: workload.slots },
      () => new HttpConnection(job.host, job.port),
    );
    this.service = job.mode === 'open' ? createHistogram() : null;
    if (job.mode === 'open' && !(job.rate && job.rate > 0)) {
      throw new Error('open loop needs a positive rate');
    }
    this.interval = job.mode === 'open' ? 1000 / (job.rate as number) : 0;
  }

  /** Ends the window now (the orchestrator's `stop`, e.g. when a sync finished early). */
  stop(): void {
    this.stopRequested = true;
    const now = performance.now();
    if (this.end > 0 && now < this.end) this.end = now;
  }

  async run(): Promise<GeneratorResult> {
    await Promise.all(this.connections.map((c) => c.open()));
    const cpuAtStart = process.cpuUsage();
    this.start = performance.now();
    this.measureStart = this.start + this.job.warmupMs;
    this.end = this.stopRequested ? this.start : this.measureStart + this.job.durationMs;
    const totalMs = this.job.warmupMs + this.job.durationMs;
    this.onStart();

    let lastCompleted = 0;
    let lastTick = this.start;
    const progress = setInterval(() => {
      const now = performance.now();
      const rate = ((this.completedTotal - lastCompleted) * 1000) / Math.max(1, now - lastTick);
      lastCompleted = this.completedTotal;
      lastTick = now;
      this.onProgress({
        elapsedMs: Math.min(now - this.start, totalMs),
        totalMs,
        completed: this.completedTotal,
        rate,
      });
    }, PROGRESS_INTERVAL_MS);
    const timeouts = setInterval(() => this.sweepTimeouts(), 500);

    const done = new Promise<void>((resolve) => (this.finish = resolve));
    if (this.job.mode === 'closed') {
      for (let slot = 0; slot < this.connections.length; slot++) this.issueClosed(slot);
    } else {
      for (let slot = 0; slot < this.connections.length; slot++) this.freeSlots.push(slot);
      this.nextArrival = this.start;
      this.pump();
    }
    // The drain deadline: whatever is still queued or in flight then is a failure.
    const drainTimer = setInterval(() => {
      if (performance.now() > this.end + this.job.drainMs) this.abandon();
    }, 100);
    this.checkDone();
    await done;
    clearInterval(progress);
    clearInterval(timeouts);
    clearInterval(drainTimer);
    if (this.timer) clearTimeout(this.timer);
    for (const c of this.connections) c.close();
    const cpu = process.cpuUsage(cpuAtStart);
    return this.result((cpu.user + cpu.system) / 1000 / Math.max(1, performance.now() - this.start));
  }

  private issueClosed(slot: number): void {
    if (this.stopped || performance.now() >= this.end) {
      this.checkDone();
      return;
    }
    this.issue(slot, -1);
  }

  /** Sends on `slot`; `intended` < 0 means "now" (closed loop). */
  private issue(slot: number, intended: number): void {
    this.inFlight++;
    const next = this.workload.next(slot);
    if (next instanceof Promise) {
      next.then(
        (req) => this.send(slot, intended, req),
        (err: unknown) => this.completeRequest(slot, intended, 0, null, err, undefined),
      );
    } else {
      this.send(slot, intended, next);
    }
  }

  private send(slot: number, intended: number, req: PreparedRequest): void {
    const sentAt = performance.now();
    const conn = this.connections[slot] as HttpConnection;
    conn.send(req.data, req.keepBody, sentAt, (err, res) =>
      this.completeRequest(slot, intended < 0 ? sentAt : intended, sentAt, req, err, res),
    );
  }

  private completeRequest(
    slot: number,
    intended: number,
    sentAt: number,
    req: PreparedRequest | null,
    err: unknown,
    res: HttpResponse | undefined,
  ): void {
    this.inFlight--;
    this.completedTotal++;
    const now = performance.now();
    const ok = !err && req !== null && res !== undefined && this.workload.complete(slot, req, res);
    const kind = req?.kind ?? 'unknown';
    const stats = this.kindStats(kind);
    if (!ok) {
      this.recordError(err, res);
      stats.errors++;
    } else if (intended >= this.measureStart && intended < this.end) {
      const us = Math.max(1, Math.round((now - intended) * 1000));
      this.latency.recordValue(us);
      stats.latency.recordValue(us);
      stats.requests++;
      this.measured++;
      this.service?.recordValue(Math.max(1, Math.round((now - sentAt) * 1000)));
    }
    if (this.job.mode === 'closed') {
      this.issueClosed(slot);
    } else {
      this.freeSlots.push(slot);
      this.pump();
    }
  }

  private kindStats(kind: string): KindStats {
    let stats = this.kinds.get(kind);
    if (!stats) {
      stats = { requests: 0, errors: 0, latency: createHistogram() };
      this.kinds.set(kind, stats);
    }
    return stats;
  }

  private recordError(err: unknown, res: HttpResponse | undefined): void {
    this.errors++;
    let key: string;
    let sample: string;
    if (res) {
      key = String(res.status);
      sample = `${res.status} ${res.body ? res.body.toString('utf8').slice(0, 300) : ''}`.trim();
    } else {
      const message = err instanceof Error ? err.message : String(err);
      key = message.startsWith('timeout') ? 'timeout' : 'network';
      sample = `${key}: ${message}`;
    }
    this.errorsByStatus[key] = (this.errorsByStatus[key] ?? 0) + 1;
    if (this.errorSamples.length < MAX_ERROR_SAMPLES) this.errorSamples.push(sample);
  }

  /** Open loop: release due arrivals, hand queued ones to free slots, re-arm the timer. */
  private pump(): void {
    const now = performance.now();
    while (!this.stopped && this.nextArrival <= now && this.nextArrival < this.end) {
      this.queue.push(this.nextArrival);
      this.nextArrival = this.arrivalAfter(this.nextArrival);
    }
    while (!this.stopped && this.queueHead < this.queue.length && this.freeSlots.length > 0) {
      const slot = this.freeSlots.shift() as number;
      const intended = this.queue[this.queueHead++] as number;
      this.issue(slot, intended);
    }
    if (this.queueHead > 4096 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
    if (!this.timer && !this.stopped && this.nextArrival < this.end) {
      // setTimeout has ~1 ms granularity; completions also call pump(), which keeps high rates
      // on time between timer ticks. Lateness is charged to latency since it counts from `intended`.
      this.timer = setTimeout(
        () => {
          this.timer = null;
          this.pump();
        },
        Math.max(0, this.nextArrival - now),
      );
    }
    this.checkDone();
  }

  /**
   * The arrival after one at `t`. The warm-up ramps the rate linearly from 10 % to the target: a
   * freshly forked generator runs cold for a few hundred milliseconds, and starting at full rate
   * would build a backlog the measured window then inherits. The ramp never steps over the start
   * of the window (at low rates one ramp gap can be longer than the whole warm-up).
   */
  private arrivalAfter(t: number): number {
    if (t >= this.measureStart || this.job.warmupMs <= 0) return t + this.interval;
    const ramp = 0.1 + (0.9 * (t - this.start)) / this.job.warmupMs;
    return Math.min(t + this.interval / ramp, this.measureStart);
  }

  private sweepTimeouts(): void {
    const now = performance.now();
    for (const conn of this.connections) {
      if (conn.busy && now - conn.sentAt > this.job.requestTimeoutMs) {
        conn.abort(new Error(`timeout after ${this.job.requestTimeoutMs} ms`));
      }
    }
  }

  /** Drain deadline passed: fail what is in flight, count what never left as unsent. */
  private abandon(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const conn of this.connections) {
      if (conn.busy) conn.abort(new Error('timeout: still in flight at the drain deadline'));
    }
    this.checkDone();
  }

  private checkDone(): void {
    if (!this.finish || this.inFlight > 0) return;
    const now = performance.now();
    const arrivalsLeft =
      this.job.mode === 'open' &&
      !this.stopped &&
      (this.nextArrival < this.end || this.queueHead < this.queue.length);
    if (arrivalsLeft || (!this.stopped && now < this.end && this.job.mode === 'closed')) return;
    const finish = this.finish;
    this.finish = null;
    finish();
  }

  private result(cpu: number): GeneratorResult {
    const byKind: Record<string, KindOutcome> = {};
    for (const [kind, stats] of this.kinds) {
      byKind[kind] = {
        requests: stats.requests,
        errors: stats.errors,
        latency: encodeHistogram(stats.latency),
      };
    }
    const unsent = this.queue.length - this.queueHead;
    if (unsent > 0) {
      this.errors += unsent;
      this.errorsByStatus['unsent'] = unsent;
    }
    const windowMs = Math.max(1, this.end - this.measureStart);
    return {
      mode: this.job.mode,
      connections: this.connections.length,
      warmupMs: this.job.warmupMs,
      windowMs,
      rate: this.job.rate,
      requests: this.measured,
      errors: this.errors,
      errorsByStatus: this.errorsByStatus,
      errorSamples: this.errorSamples,
      unsent,
      latency: encodeHistogram(this.latency),
      service: this.service ? encodeHistogram(this.service) : null,
      byKind,
      agents: this.workload.agents(),
      cpu,
    };
  }
}
