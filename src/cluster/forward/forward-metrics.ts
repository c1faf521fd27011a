import { Counter, Histogram, type Registry } from 'prom-client';

/** How a forward ended: answered by the owner (its answer may be an error), refused as a stale route, or lost. */
export type ForwardOutcome = 'answered' | 'stale_route' | 'unreachable';

/**
 * Actor messages over HTTP/2 to the internal listener, whole requests proxied to the public URL,
 * or batched record reads for org-level reads (shard-gather.ts).
 */
export type ForwardKind = 'actor' | 'request' | 'read';

/** Per-node forwarding figures (docs/operating.md): how many, how long, and how many stale routes. */
export class ForwardMetrics {
  private readonly forwarded: Counter<'kind' | 'outcome'>;
  private readonly seconds: Histogram<'kind'>;
  private readonly refused: Counter<'kind'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.forwarded = new Counter({ name: 'repohost_forwarded_total', help: 'Requests and actor messages this node forwarded to a shard owner, by outcome', labelNames: ['kind', 'outcome'], registers });
    this.seconds = new Histogram({
      name: 'repohost_forward_seconds',
      help: 'Time from sending a forward until the owner answered (until its headers, for proxied requests)',
      labelNames: ['kind'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers,
    });
    this.refused = new Counter({ name: 'repohost_stale_route_refusals_total', help: 'Forwarded requests and messages this node answered 503 because it does not own their shard', labelNames: ['kind'], registers });
  }

  observe(kind: ForwardKind, outcome: ForwardOutcome, seconds: number): void {
    this.forwarded.inc({ kind, outcome });
    if (outcome !== 'unreachable') this.seconds.observe({ kind }, seconds);
  }

  staleRefused(kind: ForwardKind): void {
    this.refused.inc({ kind });
  }
}
