/** Derived views of a report shared by the stdout summary and the HTML page. */
import type { BenchReport, ComparisonRow, PhaseResult, ScenarioResult, WorkerRun } from './report-types.js';

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

/** One row per scenario/variant/phase with its throughput and p99 at every worker count. */
export function buildComparison(runs: readonly WorkerRun[]): ComparisonRow[] {
  const rows = new Map<string, ComparisonRow>();
  for (const run of runs) {
    const w = String(run.workers ?? 'external');
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

export function allResults(report: Pick<BenchReport, 'baseline' | 'runs'>): Array<{ workers: number | null; result: ScenarioResult }> {
  return [
    ...report.baseline.map((result) => ({ workers: null, result })),
    ...report.runs.flatMap((run) => run.results.map((result) => ({ workers: run.workers, result }))),
  ];
}
