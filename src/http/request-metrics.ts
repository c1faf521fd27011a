import type { Registry } from 'prom-client';

/**
 * Request counts and latency per route. They are recorded on every request — at tens of
 * thousands a second, prom-client's label hashing on each `inc`/`observe` was a visible share of
 * a cached read — so the hot path only bumps numbers in a per-route record, and the Prometheus
 * samples are built when the operator listener is scraped.
 */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

interface Series {
  labels: { route: string; method: string };
  byStatus: Map<number, number>;
  /** Observations per bucket (not cumulative); the last slot is +Inf only. */
  buckets: number[];
  sum: number;
  count: number;
}

interface Sample {
  metricName?: string;
  labels: Record<string, string | number>;
  value: number;
}

export class RequestMetrics {
  /** By route, then method: looked up without building a key string per request. */
  private readonly series = new Map<string, Map<string, Series>>();

  constructor(registry: Registry) {
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: () => Sample[]) => ({
      name,
      help,
      type,
      aggregator: 'sum' as const,
      get: () => ({ name, help, type, aggregator: 'sum' as const, values: values() }),
      reset: () => this.series.clear(),
    });
    // prom-client's registry formats any object with this shape; its metric classes are one kind of it.
    registry.registerMetric(metric('repohost_http_requests_total', 'HTTP requests by route, method and status', 'counter', () => this.counts()) as never);
    registry.registerMetric(metric('repohost_http_request_duration_seconds', 'HTTP request latency by route', 'histogram', () => this.latencies()) as never);
  }

  observe(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.series.get(route);
    if (!byMethod) this.series.set(route, (byMethod = new Map<string, Series>()));
    let s = byMethod.get(method);
    if (!s) byMethod.set(method, (s = { labels: { route, method }, byStatus: new Map(), buckets: new Array<number>(BUCKETS.length + 1).fill(0), sum: 0, count: 0 }));
    s.byStatus.set(status, (s.byStatus.get(status) ?? 0) + 1);
    let i = 0;
    while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
    s.buckets[i]!++;
    s.sum += seconds;
    s.count++;
  }

  private *all(): Generator<Series> {
    for (const byMethod of this.series.values()) yield* byMethod.values();
  }

  private counts(): Sample[] {
    const out: Sample[] = [];
    for (const s of this.all()) {
      for (const [status, value] of s.byStatus) out.push({ labels: { ...s.labels, status: String(status) }, value });
    }
    return out;
  }

  private latencies(): Sample[] {
    const name = 'repohost_http_request_duration_seconds';
    const out: Sample[] = [];
    for (const s of this.all()) {
      let cumulative = 0;
      BUCKETS.forEach((le, i) => {
        cumulative += s.buckets[i]!;
        out.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le }, value: cumulative });
      });
      out.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count });
      out.push({ metricName: `${name}_sum`, labels: s.labels, value: s.sum });
      out.push({ metricName: `${name}_count`, labels: s.labels, value: s.count });
    }
    return out;
  }
}
