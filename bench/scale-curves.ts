/**
 * Curves of the scale family: points gathered per series as the sizes are measured, then judged
 * against the target the issue states for that curve.
 */
import { round } from './phases.js';
import type { Curve, CurvePoint, CurveTarget, CurveTargetKind, CurveTargetOutcome, PhaseResult } from './report-types.js';

export interface TargetSpec {
  text: string;
  kind: CurveTargetKind;
  limit: number;
  /** Series judged; the others are only shown. */
  series: string[];
}

export class CurveBuilder {
  private readonly points = new Map<string, CurvePoint[]>();

  constructor(
    readonly id: string,
    readonly title: string,
    readonly sizeLabel: string,
    readonly unit: string,
  ) {}

  add(series: string, size: number, value: number): void {
    const list = this.points.get(series) ?? [];
    list.push({ size, value: round(value, 3) });
    this.points.set(series, list);
  }

  /**
   * p50 and p99 of a point measured in several rounds, as the series `<label> p50` and
   * `<label> p99` (`p50`, `p99` without a label): the median over the rounds of each.
   */
  addLatency(label: string | null, size: number, rounds: readonly PhaseResult[]): void {
    const series = (p: string): string => (label ? `${label} ${p}` : p);
    this.add(series('p50'), size, median(rounds.map((p) => p.latency.p50)));
    this.add(series('p99'), size, median(rounds.map((p) => p.latency.p99)));
  }

  build(target: TargetSpec | null = null): Curve {
    const series = [...this.points.entries()].map(([label, points]) => ({ label, points: [...points].sort((a, b) => a.size - b.size) }));
    return { id: this.id, title: this.title, sizeLabel: this.sizeLabel, unit: this.unit, series, target: target ? judge(series, target) : null };
  }
}

function outcome(kind: CurveTargetKind, limit: number, label: string, points: readonly CurvePoint[]): CurveTargetOutcome {
  if (kind === 'ceiling') {
    if (points.length === 0) return { series: label, value: null, met: null };
    const worst = Math.max(...points.map((p) => p.value));
    return { series: label, value: worst, met: worst <= limit };
  }
  if (points.length < 2) return { series: label, value: null, met: null };
  const values = points.map((p) => p.value);
  const [from, to] = kind === 'growth' ? [values[0]!, values[values.length - 1]!] : [Math.min(...values), Math.max(...values)];
  if (from <= 0) return { series: label, value: null, met: null };
  const ratio = round(to / from, 2);
  return { series: label, value: ratio, met: ratio <= limit };
}

export function judge(series: ReadonlyArray<{ label: string; points: CurvePoint[] }>, spec: TargetSpec): CurveTarget {
  const outcomes = spec.series.map((label) => outcome(spec.kind, spec.limit, label, series.find((s) => s.label === label)?.points ?? []));
  const judged = outcomes.filter((o) => o.met !== null);
  return {
    text: spec.text,
    kind: spec.kind,
    limit: spec.limit,
    outcomes,
    met: judged.length === 0 ? null : judged.every((o) => o.met === true),
  };
}

/** Metrics for the flat `metrics` map: each judged series' ratio, keyed `<curve id>.<series>`. */
export function targetMetrics(curves: readonly Curve[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of curves) for (const o of c.target?.outcomes ?? []) if (o.value !== null) out[`${c.id}.${o.series}`] = o.value;
  return out;
}

/** The middle value (the mean of the two middle ones for an even count); 0 for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return 0;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Sizes as people say them: 1k, 100k, 1M. */
export function sizeName(n: number): string {
  if (n >= 1_000_000 && n % 1_000_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 1_000 && n % 1_000 === 0) return `${n / 1_000}k`;
  return String(n);
}
