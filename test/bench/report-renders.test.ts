import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { buildCharts, renderReportHtml } from '../../bench/report-html.js';
import { loadPage } from './headless-chromium.js';
import { reportFixture } from './fixtures/report-fixture.js';
import '../helpers/child-env.js';

const REPORT_CLI = fileURLToPath(new URL('../../bench/report.js', import.meta.url));

// What the page reports once its script ran: charts drawn, canvases, and how many have pixels.
const PROBE = `(() => {
  const canvases = [...document.querySelectorAll('canvas')];
  const painted = canvases.filter((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) return true;
    return false;
  }).length;
  return { drawn: Number(document.body.dataset.chartsDrawn), canvases: canvases.length, painted,
           externalRefs: document.querySelectorAll('script[src], link[href], img[src]').length };
})()`;

t.test('bench report - renders a self-contained page whose charts draw in headless chromium', async (t) => {
  const dir = await mkdtemp(join(os.tmpdir(), 'bench-report-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const input = join(dir, 'fixture.json');
  const out = join(dir, 'report.html');
  await writeFile(input, JSON.stringify(reportFixture));

  const cli = spawnSync(process.execPath, [REPORT_CLI, '--input', input, '--out', out], { encoding: 'utf8' });
  t.equal(cli.status, 0, `report CLI exits 0 (stderr: ${cli.stderr})`);
  const html = await readFile(out, 'utf8');
  t.notMatch(html, /<script[^>]+src=/i, 'no external scripts');
  t.notMatch(html, /sourceMappingURL/, 'no source map to fetch');
  t.match(html, /Chart\.js v4/, 'Chart.js is inlined');
  t.notMatch(html, /open <\/script>/, 'report text is escaped');

  const expected = buildCharts(reportFixture).length;
  t.equal(expected, 8, 'fixture yields throughput, two latency, the ratio chart and two curves per worker count');

  const page = await loadPage(out, 'document.body && document.body.dataset.chartsDrawn !== undefined', PROBE);
  t.same(page.errors, [], 'no console errors or exceptions');
  t.same(page.requests.filter((u) => !u.startsWith('file:') && !u.startsWith('data:')), [], 'no network requests');
  t.same(page.probe, { drawn: expected, canvases: expected, painted: expected, externalRefs: 0 }, 'every chart drew on its canvas');
});

t.test('bench report - every curve gets a chart and a table that says whether its target held', async (t) => {
  const charts = buildCharts(reportFixture);
  const curveCharts = charts.filter((c) => c.id.startsWith('curve-'));
  t.same(curveCharts.map((c) => c.id), ['curve-w1-files-apply-ops', 'curve-w1-write-bytes', 'curve-w2-files-apply-ops', 'curve-w2-write-bytes'], 'one chart per curve and run');
  const growth = curveCharts[0]!.config as { data: { datasets: Array<{ label: string; data: Array<{ x: number; y: number }> }> } };
  t.same(growth.data.datasets.find((d) => d.label.startsWith('target'))?.data, [{ x: 1000, y: 9 }, { x: 1_000_000, y: 9 }], 'growth target drawn at 3 × the smallest size');
  t.notOk(charts.some((c) => JSON.stringify(c.config).includes('deep 1k apply-ops')), 'curve points stay out of the generic latency charts');
  const html = renderReportHtml(reportFixture, '');
  t.match(html, /p50 at 1M within 3× of 1k — <b>met<\/b>/, 'growth target met is said');
  t.match(html, /≤ 32 KiB per write — <b>missed<\/b>/, 'ceiling target missed is said');
  t.match(html, /closed · deep 1M apply-ops/, 'phase labels in the results table');
});

t.test('bench report - a chart that cannot draw is reported, not hidden', async (t) => {
  const dir = await mkdtemp(join(os.tmpdir(), 'bench-report-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const out = join(dir, 'broken.html');
  // A stand-in for Chart.js that always throws: the page must say so on the console.
  await writeFile(out, renderReportHtml(reportFixture, 'window.Chart = function () { throw new Error("cannot draw"); };'));
  const page = await loadPage(out, 'document.body && document.body.dataset.chartsDrawn !== undefined', PROBE);
  t.equal((page.probe as { drawn: number }).drawn, 0, 'no chart counted as drawn');
  t.ok(page.errors.some((e) => e.includes('cannot draw')), 'the failure reached the console');
});
