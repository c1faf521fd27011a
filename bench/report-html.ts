/**
 * Renders a benchmark report as one self-contained HTML page: Chart.js is inlined and the chart
 * data is embedded as JSON, so the page needs no network when viewed (and can be attached to a
 * CI run or a PR as a single file). Chart configurations are computed here in Node and are plain
 * JSON; the page's own script only instantiates them and then sets
 * `document.body.dataset.chartsDrawn` to the number drawn (the headless test waits for it).
 */
import { closedPhase, formatNumber as fmt, hasCurves, helloThroughput, resultLabel, runKey } from './report-data.js';
import type { BenchReport, ClusterComparison, Curve, PhaseResult, ScenarioResult, WorkerRun } from './report-types.js';

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#475569', '#ea580c'];

interface ChartSpec {
  id: string;
  title: string;
  /** A Chart.js configuration (JSON only: no callbacks). */
  config: Record<string, unknown>;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that is safe inside <script>: no `</script>`, no `<!--`. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** A run's key as an element id (no spaces). */
function runId(run: WorkerRun): string {
  return runKey(run).replace(/\s+/g, '-');
}

/** A run in words: `workers 2`, `workers external`, or `cluster of 3 (jetstream), 2 workers each`. */
function runTitle(run: WorkerRun): string {
  if (run.cluster) return `cluster of ${run.cluster.nodes} (${run.cluster.shardLog}), ${run.workers ?? '-'} workers each`;
  return `workers ${runKey(run)}`;
}

function throughputChart(report: BenchReport): ChartSpec {
  const runs = [...report.runs].sort((a, b) => (a.workers ?? 0) - (b.workers ?? 0));
  const labels = runs.map(runKey);
  const series = new Map<string, Array<number | null>>();
  runs.forEach((run, i) => {
    for (const r of run.results) {
      const closed = closedPhase(r);
      if (!closed) continue;
      const label = resultLabel(r);
      const values = series.get(label) ?? new Array<number | null>(runs.length).fill(null);
      values[i] = closed.throughput;
      series.set(label, values);
    }
  });
  const hello = helloThroughput(report);
  const datasets = [...series.entries()].map(([label, data], i) => ({
    label,
    data,
    borderColor: PALETTE[i % PALETTE.length],
    backgroundColor: PALETTE[i % PALETTE.length],
    tension: 0,
  }));
  if (hello !== null) {
    datasets.push({
      label: 'hello (baseline)',
      data: labels.map(() => hello),
      borderColor: '#9ca3af',
      backgroundColor: '#9ca3af',
      tension: 0,
    });
  }
  return {
    id: 'throughput-by-workers',
    title: 'Closed-loop throughput vs server worker count',
    config: {
      type: 'line',
      data: { labels, datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: 'workers' } },
          y: { type: 'logarithmic', title: { display: true, text: 'req/s (log)' } },
        },
      },
    },
  };
}

const PERCENTILES: Array<[keyof PhaseResult['latency'], string]> = [
  ['p50', 'p50'],
  ['p90', 'p90'],
  ['p99', 'p99'],
  ['p999', 'p99.9'],
  ['max', 'max'],
];

function latencyChart(id: string, title: string, results: ScenarioResult[]): ChartSpec {
  const rows = results.flatMap((r) => r.phases.map((p) => ({ label: `${resultLabel(r)} ${p.phase}${p.label ? ` ${p.label}` : ''}`, p })));
  return {
    id,
    title,
    config: {
      type: 'bar',
      data: {
        labels: rows.map((r) => r.label),
        datasets: PERCENTILES.map(([key, label], i) => ({
          label,
          data: rows.map((r) => Math.max(r.p.latency[key], 0.001)),
          backgroundColor: PALETTE[i % PALETTE.length],
        })),
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: { y: { type: 'logarithmic', title: { display: true, text: 'ms (log)' } } },
      },
    },
  };
}

function ratioChart(report: BenchReport, hello: number): ChartSpec {
  const labels: string[] = [];
  for (const run of report.runs) for (const r of run.results) if (closedPhase(r) && !labels.includes(resultLabel(r))) labels.push(resultLabel(r));
  return {
    id: 'ratio-to-hello',
    title: 'Closed-loop throughput as a fraction of the uWS hello-world baseline',
    config: {
      type: 'bar',
      data: {
        labels,
        datasets: report.runs.map((run, i) => ({
          label: runTitle(run),
          data: labels.map((label) => {
            const phase = run.results.find((r) => resultLabel(r) === label);
            const closed = phase ? closedPhase(phase) : undefined;
            return closed ? Math.round((closed.throughput / hello) * 1000) / 1000 : null;
          }),
          backgroundColor: PALETTE[i % PALETTE.length],
        })),
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: { y: { beginAtZero: true, title: { display: true, text: '× hello' } } },
      },
    },
  };
}

export function buildCharts(report: BenchReport): ChartSpec[] {
  const charts: ChartSpec[] = [];
  if (report.runs.some((run) => run.results.some((r) => closedPhase(r)))) charts.push(throughputChart(report));
  const baselineWithPhases = report.baseline.filter((r) => r.phases.length > 0);
  for (const run of report.runs) {
    const results = [...baselineWithPhases, ...run.results.filter((r) => r.phases.length > 0 && !hasCurves(r))];
    if (results.length > 0) {
      charts.push(latencyChart(`latency-w${runId(run)}`, `Latency percentiles, ${runTitle(run)}`, results));
    }
  }
  if (report.runs.length === 0 && baselineWithPhases.length > 0) {
    charts.push(latencyChart('latency-baseline', 'Latency percentiles (baseline)', baselineWithPhases));
  }
  const hello = helloThroughput(report);
  if (hello !== null && report.runs.some((run) => run.results.some((r) => closedPhase(r)))) charts.push(ratioChart(report, hello));
  for (const run of report.runs) {
    for (const r of run.results) {
      for (const curve of r.curves ?? []) charts.push(curveChart(curve, report.runs.length > 1 ? ` (${runTitle(run)})` : '', `curve-w${runId(run)}-${curve.id}`));
    }
  }
  return charts;
}

/** Log axis when the values span a decade or more. */
function axisType(values: number[]): 'logarithmic' | 'linear' {
  const positive = values.filter((v) => v > 0);
  return positive.length > 1 && Math.max(...positive) / Math.min(...positive) >= 10 ? 'logarithmic' : 'linear';
}

/** One chart per curve: a line per series over the sizes, the target as a dashed line. */
function curveChart(curve: Curve, suffix: string, id: string): ChartSpec {
  const sizes = [...new Set(curve.series.flatMap((s) => s.points.map((p) => p.size)))].sort((a, b) => a - b);
  const datasets: Array<Record<string, unknown>> = curve.series.map((s, i) => ({
    label: s.label,
    data: s.points.map((p) => ({ x: p.size, y: Math.max(p.value, 0.001) })),
    borderColor: PALETTE[i % PALETTE.length],
    backgroundColor: PALETTE[i % PALETTE.length],
    tension: 0,
  }));
  const t = curve.target;
  const first = sizes[0];
  const last = sizes[sizes.length - 1];
  if (t && first !== undefined && last !== undefined) {
    const line = (label: string, y: number): Record<string, unknown> => ({
      label,
      data: [{ x: first, y }, { x: last, y }],
      borderColor: '#9ca3af',
      backgroundColor: '#9ca3af',
      borderDash: [6, 4],
      pointRadius: 0,
      tension: 0,
    });
    if (t.kind === 'ceiling') datasets.push(line(`target ≤ ${fmt(t.limit)}`, t.limit));
    if (t.kind === 'growth') {
      for (const o of t.outcomes) {
        const from = curve.series.find((s) => s.label === o.series)?.points[0];
        if (from) datasets.push(line(`target: ${o.series} ≤ ${t.limit} × at ${fmt(from.size)}`, from.value * t.limit));
      }
    }
  }
  const values = datasets.flatMap((d) => (d.data as Array<{ y: number }>).map((p) => p.y));
  return {
    id,
    title: `${curve.title}${suffix}`,
    config: {
      type: 'line',
      data: { datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { type: axisType(sizes), title: { display: true, text: curve.sizeLabel } },
          y: { type: axisType(values), beginAtZero: true, title: { display: true, text: curve.unit } },
        },
      },
    },
  };
}

function curveValue(value: number, unit: string): string {
  if (unit === 'req/s' || value >= 1000) return fmt(value);
  return fmt(value, value >= 100 ? 1 : 2);
}

/** A curve as a table: a row per series, a column per size, the target and whether it held. */
function curveTable(curve: Curve, hello: number | null): string {
  const sizes = [...new Set(curve.series.flatMap((s) => s.points.map((p) => p.size)))].sort((a, b) => a - b);
  const rows = curve.series.flatMap((s) => {
    const cells = (f: (v: number) => string): string =>
      sizes.map((size) => {
        const p = s.points.find((q) => q.size === size);
        return `<td>${p ? f(p.value) : ''}</td>`;
      }).join('');
    const row = [`<tr><td>${escapeHtml(s.label)}</td>${cells((v) => curveValue(v, curve.unit))}</tr>`];
    if (curve.unit === 'req/s' && hello) row.push(`<tr><td>${escapeHtml(s.label)} × hello</td>${cells((v) => `${fmt(v / hello, 3)}×`)}</tr>`);
    return row;
  });
  const t = curve.target;
  const verdict = (met: boolean | null): string => (met === null ? 'not judged' : met ? 'met' : 'missed');
  const target = t
    ? `<p class="target ${t.met === false ? 'failed' : t.met ? 'ok' : ''}">Target: ${escapeHtml(t.text)} — <b>${verdict(t.met)}</b>` +
      (t.outcomes.length > 0
        ? ` (${t.outcomes.map((o) => `${escapeHtml(o.series)}: ${o.value === null ? '–' : t.kind === 'ceiling' ? fmt(o.value) : `${fmt(o.value, 2)}×`}`).join('; ')}, limit ${t.kind === 'ceiling' ? fmt(t.limit) : `${t.limit}×`})`
        : '') +
      '</p>'
    : '';
  return `<h3>${escapeHtml(curve.title)} <small>(${escapeHtml(curve.unit)})</small></h3>
<table><thead><tr><th>${escapeHtml(curve.sizeLabel)}</th>${sizes.map((n) => `<th>${fmt(n)}</th>`).join('')}</tr></thead><tbody>${rows.join('\n')}</tbody></table>${target}`;
}

function curvesSection(title: string, results: ScenarioResult[], hello: number | null): string {
  const withCurves = results.filter(hasCurves);
  if (withCurves.length === 0) return '';
  return `<h2>${escapeHtml(title)}</h2>\n${withCurves.map((r) => `<h3 class="result">${escapeHtml(resultLabel(r))}</h3>\n${(r.curves ?? []).map((c) => curveTable(c, hello)).join('\n')}`).join('\n')}`;
}


function resultsTable(title: string, results: ScenarioResult[], hello: number | null): string {
  const rows = results
    .flatMap((r) => {
      const status = `<td class="${r.status}">${escapeHtml(r.status)}${r.verification ? (r.verification.ok ? ' (verified)' : ' (verification failed)') : ''}</td>`;
      if (r.phases.length === 0) {
        return [`<tr><td>${escapeHtml(resultLabel(r))}</td><td colspan="12"></td>${status}</tr>`];
      }
      return r.phases.map(
        (p) =>
          `<tr><td>${escapeHtml(resultLabel(r))}</td><td>${p.phase}${p.label ? ` · ${escapeHtml(p.label)}` : ''}</td><td>${p.connections}</td>` +
          `<td>${p.targetRate === null ? '' : fmt(p.targetRate)}</td><td>${fmt(p.throughput)}</td>` +
          `<td>${fmt(p.latency.p50, 2)}</td><td>${fmt(p.latency.p90, 2)}</td><td>${fmt(p.latency.p99, 2)}</td>` +
          `<td>${fmt(p.latency.p999, 2)}</td><td>${fmt(p.latency.max, 2)}</td><td>${p.errors}</td><td>${Math.round(p.generatorCpu * 100)} %</td>` +
          `<td>${hello && p.phase === 'closed' ? `${fmt(p.throughput / hello, 2)}×` : ''}</td>${status}</tr>`,
      );
    })
    .join('\n');
  const notes = results
    .flatMap((r) => {
      const items: string[] = [];
      if (r.note) items.push(`<li><b>${escapeHtml(resultLabel(r))}</b>: ${escapeHtml(r.note)}</li>`);
      const metrics = Object.entries(r.metrics);
      if (metrics.length > 0) {
        items.push(`<li><b>${escapeHtml(resultLabel(r))}</b>: ${metrics.map(([k, v]) => `${escapeHtml(k)} = ${fmt(v, Number.isInteger(v) ? 0 : 2)}`).join(', ')}</li>`);
      }
      return items;
    })
    .join('\n');
  return `<h2>${escapeHtml(title)}</h2>
<table><thead><tr><th>scenario</th><th>phase</th><th>conns</th><th>target rate</th><th>req/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>errors</th><th title="CPU of the load generator (one core = 100 %)">gen cpu</th><th>vs hello</th><th>status</th></tr></thead>
<tbody>${rows}</tbody></table>${notes ? `<ul class="notes">${notes}</ul>` : ''}`;
}

function clusterTable(c: ClusterComparison): string {
  const ratio = (v: number | null): string => (v === null ? '–' : `${fmt(v, 2)}×`);
  const rows = c.rows
    .map((r) => `<tr><td>${escapeHtml(resultLabel(r))}</td><td>${r.phase}${r.label ? ` · ${escapeHtml(r.label)}` : ''}</td><td>${ratio(r.throughput)}</td><td>${ratio(r.p50)}</td><td>${ratio(r.p99)}</td></tr>`)
    .join('\n');
  const hop = c.hop
    ? `<p>Forwarding hop (sequential GETs of one repository through a node that forwards, against its owner): p50 ${ratio(c.hop.ratioP50)}, +${fmt(c.hop.addedP50Ms, 2)} ms at p50, +${fmt(c.hop.addedP99Ms, 2)} ms at p99.</p>`
    : '';
  return `<h2>Cluster of ${c.nodes} ÷ single node</h2>
<p>${escapeHtml(c.shardLog)} shard log; the clients enter through ${escapeHtml(c.entry)}, which forwards the requests of the shards it does not own.</p>
<table><thead><tr><th>scenario</th><th>phase</th><th>req/s</th><th>p50</th><th>p99</th></tr></thead><tbody>${rows}</tbody></table>${hop}`;
}

function comparisonTable(report: BenchReport, baseline: BenchReport): string {
  const rows: string[] = [];
  const find = (r: BenchReport, label: string, workers: number | null): PhaseResult | undefined => {
    const all = [...r.baseline.map((x) => ({ w: null as number | null, x })), ...r.runs.flatMap((run) => run.results.map((x) => ({ w: run.workers, x })))];
    const hit = all.find((e) => resultLabel(e.x) === label && (e.x.scenario === 'hello' || e.w === workers));
    return hit ? closedPhase(hit.x) : undefined;
  };
  const current = [...report.baseline.map((x) => ({ w: null as number | null, x })), ...report.runs.flatMap((run) => run.results.map((x) => ({ w: run.workers, x })))];
  for (const { w, x } of current) {
    const now = closedPhase(x);
    const then = find(baseline, resultLabel(x), w);
    if (!now || !then) continue;
    const delta = ((now.throughput - then.throughput) / then.throughput) * 100;
    rows.push(
      `<tr><td>${escapeHtml(resultLabel(x))}</td><td>${w ?? '-'}</td><td>${fmt(then.throughput)}</td><td>${fmt(now.throughput)}</td>` +
        `<td class="${delta < -10 ? 'failed' : ''}">${delta >= 0 ? '+' : ''}${fmt(delta, 1)} %</td><td>${fmt(then.latency.p99, 2)}</td><td>${fmt(now.latency.p99, 2)}</td></tr>`,
    );
  }
  if (rows.length === 0) return '';
  return `<h2>Against the committed baseline (${escapeHtml(baseline.date)}, ${escapeHtml(baseline.machine.model)} × ${baseline.machine.cpus})</h2>
<table><thead><tr><th>scenario</th><th>workers</th><th>baseline req/s</th><th>this run req/s</th><th>change</th><th>baseline p99 ms</th><th>this p99 ms</th></tr></thead><tbody>${rows.join('\n')}</tbody></table>`;
}

export interface RenderOptions {
  /** The committed baseline (`bench/results/baseline-2core.json`) to compare against, if any. */
  baseline?: BenchReport | null;
}

export function renderReportHtml(report: BenchReport, chartJsSource: string, options: RenderOptions = {}): string {
  if (/<\/script/i.test(chartJsSource)) throw new Error('Chart.js source contains </script: cannot inline it safely');
  const charts = buildCharts(report);
  const hello = helloThroughput(report);
  const m = report.machine;
  const sections = [
    report.baseline.length > 0 ? resultsTable('Baseline', report.baseline, hello) : '',
    ...report.runs.map((run) =>
      resultsTable(run.cluster ? `Cluster of ${run.cluster.nodes} nodes, ${run.workers ?? '-'} worker(s) each` : run.workers === null ? 'External server' : `Server with ${run.workers} worker(s)`, run.results, hello),
    ),
    report.cluster ? clusterTable(report.cluster) : '',
    ...report.runs.map((run) => curvesSection(`Curves${report.runs.length > 1 ? `, ${runTitle(run)}` : ''}`, run.results, hello)),
    options.baseline && options.baseline !== report ? comparisonTable(report, options.baseline) : '',
  ].join('\n');
  const chartDivs = charts
    .map((c) => `<section class="chart"><h2>${escapeHtml(c.title)}</h2><div class="canvas-box"><canvas id="${c.id}"></canvas></div></section>`)
    .join('\n');
  const method = Object.entries(report.method)
    .map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>repohost bench ${escapeHtml(report.date)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#111}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e5e7eb;padding:.25rem .5rem;text-align:right}th:first-child,td:first-child{text-align:left}
.ok{color:#15803d}.failed{color:#b91c1c;font-weight:600}.skipped{color:#92400e}
.canvas-box{position:relative;height:360px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}
.target{margin:.3rem 0 1rem}h3.result{font-size:1.05rem;margin-top:1.5rem}h3 small{font-weight:400;color:#6b7280}
.badge{padding:.1rem .5rem;border-radius:.25rem;color:#fff;background:${report.ok ? '#15803d' : '#b91c1c'}}
</style></head>
<body>
<h1>repohost benchmark <span class="badge">${report.ok ? 'all passed' : 'FAILED'}</span></h1>
<p>${escapeHtml(report.date)} · ${escapeHtml(m.model)} × ${m.cpus} CPUs · ${escapeHtml(m.platform)} ${escapeHtml(m.release)} · Node ${escapeHtml(report.node.version)} · commit ${escapeHtml(report.gitCommit ?? 'unknown')} · ${report.target.kind === 'external' ? `external server ${escapeHtml(report.target.url ?? '')}` : 'server spawned by the bench'} · wall time ${fmt(report.wallTimeSec, 1)} s</p>
${chartDivs}
${sections}
<h2>Method</h2><dl>${method}</dl>
<h2>Options</h2><pre>${escapeHtml(JSON.stringify(report.options, null, 2))}</pre>
<script type="application/json" id="bench-charts">${scriptJson(charts)}</script>
<script>${chartJsSource}</script>
<script>
(function () {
  var specs = JSON.parse(document.getElementById('bench-charts').textContent);
  var drawn = 0;
  for (var i = 0; i < specs.length; i++) {
    try {
      new Chart(document.getElementById(specs[i].id), specs[i].config);
      drawn++;
    } catch (err) {
      console.error('chart ' + specs[i].id + ' failed: ' + err);
    }
  }
  document.body.dataset.chartsDrawn = String(drawn);
})();
</script>
</body></html>
`;
}
