/** Derived views of a report shared by the stdout summary and the HTML page. */
import type { BenchReport, ClusterComparison, ClusterRatioRow, ClusterRunInfo, ComparisonRow, PhaseResult, ScenarioResult, WorkerRun } from './report-types.js';

/** Thousands separators and exactly `digits` decimals. */
export function formatNumber(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function resultLabel(r: Pick<ScenarioResult, 'scenario' | 'variant'>): string {
  return r.variant ? `${r.scenario}/${r.variant}` : r.scenario;
}

/**
 * The closed-loop phase that stands for the result in throughput comparisons; none for a result
 * whose phases are the points of curves (each is read on its curve instead).
 */
export function closedPhase(r: ScenarioResult): PhaseResult | undefined {
  if (hasCurves(r)) return undefined;
  return r.phases.find((p) => p.phase === 'closed');
}

export function hasCurves(r: Pick<ScenarioResult, 'curves'>): boolean {
  return (r.curves?.length ?? 0) > 0;
}

/** Closed-loop req/s of the hello baseline, or null when it was not run (or failed). */
export function helloThroughput(report: Pick<BenchReport, 'baseline'>): number | null {
  const hello = report.baseline.find((r) => r.scenario === 'hello');
  const phase = hello ? closedPhase(hello) : undefined;
  return phase && phase.throughput > 0 ? phase.throughput : null;
}

/** How a run is named in comparisons and charts: its worker count, `external`, or `cluster N`. */
export function runKey(run: Pick<WorkerRun, 'workers' | 'cluster'>): string {
  if (run.cluster) return `cluster ${run.cluster.nodes}`;
  return run.workers === null ? 'external' : String(run.workers);
}

/** One row per scenario/variant/phase with its throughput and p99 at every worker count. */
export function buildComparison(runs: readonly WorkerRun[]): ComparisonRow[] {
  const rows = new Map<string, ComparisonRow>();
  for (const run of runs) {
    const w = runKey(run);
    for (const result of run.results) {
      for (const phase of result.phases) {
        const key = `${resultLabel(result)}|${phase.phase}|${phase.label ?? ''}`;
        let row = rows.get(key);
        if (!row) {
          row = { scenario: result.scenario, variant: result.variant, phase: phase.phase, throughput: {}, p99: {} };
          if (phase.label) row.label = phase.label;
          rows.set(key, row);
        }
        row.throughput[w] = phase.throughput;
        row.p99[w] = phase.latency.p99;
      }
    }
  }
  return [...rows.values()];
}

export function allResults(report: Pick<BenchReport, 'baseline' | 'runs'>): Array<{ workers: number | null; cluster?: ClusterRunInfo; result: ScenarioResult }> {
  return [
    ...report.baseline.map((result) => ({ workers: null, result })),
    ...report.runs.flatMap((run) => run.results.map((result) => ({ workers: run.workers, ...(run.cluster ? { cluster: run.cluster } : {}), result }))),
  ];
}

function ratio(cluster: number, single: number): number | null {
  return single > 0 ? Math.round((cluster / single) * 100) / 100 : null;
}

/** The cluster run's phases against the same phases of the single-node run (cluster ÷ single). */
export function buildClusterComparison(runs: readonly WorkerRun[]): ClusterComparison | undefined {
  const cluster = runs.find((r) => r.cluster);
  const single = runs.find((r) => !r.cluster);
  if (!cluster?.cluster || !single) return undefined;
  const rows: ClusterRatioRow[] = [];
  for (const result of cluster.results) {
    const twin = single.results.find((r) => resultLabel(r) === resultLabel(result));
    for (const phase of result.phases) {
      const base = twin?.phases.find((p) => p.phase === phase.phase && (p.label ?? '') === (phase.label ?? ''));
      if (!base || base.requests === 0 || phase.requests === 0) continue;
      const row: ClusterRatioRow = {
        scenario: result.scenario,
        variant: result.variant,
        phase: phase.phase,
        throughput: ratio(phase.throughput, base.throughput),
        p50: ratio(phase.latency.p50, base.latency.p50),
        p99: ratio(phase.latency.p99, base.latency.p99),
      };
      if (phase.label) row.label = phase.label;
      rows.push(row);
    }
  }
  const hop = cluster.cluster.hop;
  return {
    nodes: cluster.cluster.nodes,
    shardLog: cluster.cluster.shardLog,
    entry: cluster.cluster.entry,
    rows,
    hop: hop
      ? {
          ratioP50: ratio(hop.forwarded.p50, hop.direct.p50),
          addedP50Ms: Math.round((hop.forwarded.p50 - hop.direct.p50) * 1000) / 1000,
          addedP99Ms: Math.round((hop.forwarded.p99 - hop.direct.p99) * 1000) / 1000,
        }
      : null,
  };
}
