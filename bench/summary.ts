/** The plain-text summary printed on stdout at the end of `npm run bench`. */
import { allResults, formatNumber as num, helloThroughput, resultLabel, runKey } from './report-data.js';
import type { BenchReport, ClusterComparison, ClusterRunInfo, Curve } from './report-types.js';

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}


/** `label curve: series size=value …; target …` on one line. */
function curveLine(label: string, curve: Curve): string {
  const series = curve.series.map((s) => `${s.label} ${s.points.map((p) => `${num(p.size)}=${num(p.value, p.value >= 100 ? 0 : 2)}`).join(' ')}`).join(' | ');
  const t = curve.target;
  const verdict = t ? ` — target ${t.met === null ? 'not judged' : t.met ? 'met' : 'MISSED'} (${t.outcomes.map((o) => `${o.series} ${o.value === null ? '–' : num(o.value, 2)}`).join(', ')}; limit ${num(t.limit, 2)})` : '';
  return `${label} ${curve.id} [${curve.unit}]: ${series}${verdict}`;
}

function serverLabel(workers: number | null, cluster: ClusterRunInfo | undefined): string {
  if (cluster) return `${cluster.nodes}×${workers ?? '-'}`;
  return workers === null ? '-' : String(workers);
}

const ratio = (v: number | null): string => (v === null ? '-' : `${num(v, 2)}×`);

/** The cost of the cluster as ratios against the single node. */
function clusterLines(c: ClusterComparison): string[] {
  const rows = c.rows.map((r) => [resultLabel(r), r.label ? `${r.phase} ${r.label}` : r.phase, ratio(r.throughput), ratio(r.p50), ratio(r.p99)]);
  const lines = [
    `Cluster of ${c.nodes} (${c.shardLog} shard log, clients enter through ${c.entry}) ÷ single node`,
    table(['scenario', 'phase', 'req/s', 'p50', 'p99'], rows),
  ];
  if (c.hop) lines.push(`forwarding hop: p50 ${ratio(c.hop.ratioP50)} the owner's, +${num(c.hop.addedP50Ms, 2)} ms at p50, +${num(c.hop.addedP99Ms, 2)} ms at p99`);
  return lines;
}

export function formatSummary(report: BenchReport): string {
  const hello = helloThroughput(report);
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const { workers, cluster, result } of allResults(report)) {
    const label = resultLabel(result);
    if (result.phases.length === 0) {
      rows.push([label, '-', serverLabel(workers, cluster), '', '', '', '', '', '', '', '', '', result.status.toUpperCase(), '']);
    }
    for (const p of result.phases) {
      rows.push([
        label,
        p.label ? `${p.phase} ${p.label}` : p.phase,
        serverLabel(workers, cluster),
        String(p.connections),
        p.targetRate === null ? '' : num(p.targetRate),
        num(p.throughput),
        num(p.latency.p50, 2),
        num(p.latency.p90, 2),
        num(p.latency.p99, 2),
        num(p.latency.p999, 2),
        num(p.latency.max, 2),
        `${Math.round(p.generatorCpu * 100)} %`,
        result.status === 'ok' ? (result.verification ? 'ok ✓' : 'ok') : result.status.toUpperCase(),
        hello && p.phase === 'closed' ? `${num(p.throughput / hello, 2)}×` : '',
      ]);
    }
    for (const curve of result.curves ?? []) notes.push(curveLine(label, curve));
    if (result.note) notes.push(`${label}${workers === null ? '' : ` (workers ${workers})`}: ${result.note}`);
    const metrics = Object.entries(result.metrics);
    if (metrics.length > 0) notes.push(`${label}: ${metrics.map(([k, v]) => `${k}=${num(v, Number.isInteger(v) ? 0 : 2)}`).join(', ')}`);
  }
  const out = [
    table(['scenario', 'phase', 'workers', 'conns', 'rate', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9', 'max', 'gen cpu', 'status', 'vs hello'], rows),
  ];
  if (report.runs.length > 1) {
    const ws = report.runs.map(runKey);
    const cmp = report.comparison
      .filter((c) => c.phase === 'closed')
      .map((c) => [resultLabel(c), c.label ? `${c.phase} ${c.label}` : c.phase, ...ws.map((w) => (c.throughput[w] === undefined ? '-' : num(c.throughput[w] ?? 0)))]);
    out.push('', 'Throughput (req/s) by worker count', table(['scenario', 'phase', ...ws.map((w) => `w=${w}`)], cmp));
  }
  if (report.cluster) out.push('', ...clusterLines(report.cluster));
  if (notes.length > 0) out.push('', ...notes);
  return out.join('\n');
}
