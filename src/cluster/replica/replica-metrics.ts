import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ShardReport } from './replica-report.js';

/**
 * Cluster mode's per-node figures of the data plane: shard log appends (latency, refusals), shards
 * by replica state, follower lag, activations. The lease's state is the control plane's
 * (control-metrics.ts), forwarding's its own.
 */
export class ReplicaMetrics {
  readonly appendSeconds: Histogram;
  readonly refusals: Counter;

  constructor(registry: Registry, reports: () => ShardReport[]) {
    const registers = [registry];
    this.appendSeconds = new Histogram({
      name: 'repohost_shard_log_append_seconds',
      help: 'Time from sending a shard log record to its acknowledgement (including retries)',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2],
      registers,
    });
    this.refusals = new Counter({ name: 'repohost_shard_log_refusals_total', help: 'Appends the shard log refused or never confirmed (the shard was demoted)', registers });
    new Gauge({
      name: 'repohost_shards',
      help: 'Shards on this node by replica state',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        for (const r of reports()) this.inc({ state: r.state });
      },
    });
    new Gauge({
      name: 'repohost_follower_lag_max',
      help: 'Largest lag of a followed shard behind its log, in log sequence numbers',
      registers,
      collect() {
        this.set(Math.max(0, ...reports().map((r) => (r.state === 'follower' ? r.lag : 0))));
      },
    });
    new Gauge({
      name: 'repohost_shard_activations',
      help: 'Times a shard became active on this node (moves and failovers to it) since start',
      registers,
      collect() {
        this.set(reports().reduce((n, r) => n + r.moves, 0));
      },
    });
  }
}
