import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestMetrics } from './request-metrics.js';

/**
 * What LMDB itself counts for the whole environment (every writer thread of the process), from
 * `getStats()` of an environment opened with `trackMetrics`: all writers share one write lock, so
 * the time it is held per second of wall time is the share of the write path's one serial resource
 * already in use.
 */
export interface LmdbEnvStats {
  timeStartTxns: number;
  timeDuringTxns: number;
  timePageFlushes: number;
  timeSync: number;
  txns: number;
  pagesWritten: number;
}

const LMDB_TOTALS: ReadonlyArray<[keyof LmdbEnvStats, string, string]> = [
  ['timeStartTxns', 'repohost_lmdb_write_lock_wait_seconds_total', 'Time writers waited for the LMDB write lock'],
  ['timeDuringTxns', 'repohost_lmdb_write_lock_held_seconds_total', 'Time the LMDB write lock was held (commands applied, pages written)'],
  ['timePageFlushes', 'repohost_lmdb_page_write_seconds_total', 'Time spent writing dirty pages to the file at commit'],
  ['timeSync', 'repohost_lmdb_sync_seconds_total', 'Time spent waiting for the disk to make commits durable'],
  ['txns', 'repohost_lmdb_transactions_total', 'Write transactions committed'],
  ['pagesWritten', 'repohost_lmdb_pages_written_total', 'Pages written by commits'],
];

/** What the signature pool and the token verifier count, for the operator. */
export interface SignatureStats {
  verified: number;
  batches: number;
  waiting: number;
}

const SIGNATURE_TOTALS: ReadonlyArray<['verified' | 'batches', string, string]> = [
  ['verified', 'repohost_token_signatures_verified_total', 'Access-token signatures checked on the signature threads'],
  ['batches', 'repohost_token_signature_batches_total', 'Batches of signatures sent to the signature threads'],
];

/**
 * The Prometheus metrics of the process, served on the operator listener (API §13). Request
 * latency per route, mailbox depth per worker, batch sizes, LMDB commit and flush latency, and
 * LMDB's own write-lock, page and sync totals.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests: RequestMetrics;
  readonly batchSize: Histogram;
  readonly commitSeconds: Histogram;
  readonly flushSeconds: Histogram;
  readonly queueWaitSeconds: Histogram;
  readonly mailboxDepth: Gauge<'worker'>;

  constructor(depths: () => readonly number[], lmdbStats: () => Partial<LmdbEnvStats>, signatureStats: () => SignatureStats, readerLag: () => number) {
    collectDefaultMetrics({ register: this.registry, prefix: 'repohost_process_' });
    const registers = [this.registry];
    this.requests = new RequestMetrics(this.registry);
    this.batchSize = new Histogram({ name: 'repohost_actor_batch_size', help: 'Commands committed per LMDB transaction', buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], registers });
    this.commitSeconds = new Histogram({ name: 'repohost_lmdb_commit_seconds', help: 'Time to apply and commit one batch transaction', buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5], registers });
    this.flushSeconds = new Histogram({ name: 'repohost_lmdb_flush_seconds', help: 'Time from commit until the batch is flushed to disk', buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5], registers });
    this.queueWaitSeconds = new Histogram({ name: 'repohost_actor_queue_wait_seconds', help: 'Time a message waited in its mailbox before its batch started', buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5], registers });
    this.mailboxDepth = new Gauge({
      name: 'repohost_mailbox_depth',
      help: 'Messages queued or running per actor worker',
      labelNames: ['worker'],
      registers,
      collect() {
        depths().forEach((d, i) => this.set({ worker: String(i) }, d));
      },
    });
    for (const [field, name, help] of LMDB_TOTALS) {
      new Counter({
        name,
        help,
        registers,
        collect() {
          const value = lmdbStats()[field];
          if (typeof value !== 'number') return;
          this.reset();
          this.inc(value);
        },
      });
    }
    new Gauge({
      name: 'repohost_lmdb_oldest_reader_lag_transactions',
      help: 'Write transactions committed since the oldest open read snapshot began (pages freed since then are not reused)',
      registers,
      collect() {
        this.set(readerLag());
      },
    });
    // Tokens neither cached nor already being verified; the ratio of the two is the batch size.
    for (const [field, name, help] of SIGNATURE_TOTALS) {
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(signatureStats()[field]);
        },
      });
    }
    new Gauge({
      name: 'repohost_token_signature_waiting_requests',
      help: 'Requests waiting for the signature check of a token not yet verified',
      registers,
      collect() {
        this.set(signatureStats().waiting);
      },
    });
  }

  /** Batches are reported once per message; count each batch once (by its first reply). */
  observeBatch(stats: { batchSize: number; commitMs: number; flushMs: number; queueMs: number }): void {
    this.queueWaitSeconds.observe(stats.queueMs / 1000);
    if (stats.batchSize > 0) {
      this.batchSize.observe(stats.batchSize);
      this.commitSeconds.observe(stats.commitMs / 1000);
      this.flushSeconds.observe(stats.flushMs / 1000);
    }
  }
}
