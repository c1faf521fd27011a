/**
 * `npm run bench:report`: renders a result JSON into `bench/results/report.html`.
 *   --input FILE     the run to render (default: the newest bench/results/<timestamp>.json)
 *   --baseline FILE  compare against it (default: bench/results/baseline-2core.json when present)
 *   --out FILE       default bench/results/report.html
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { renderReportHtml } from './report-html.js';
import type { BenchReport } from './report-types.js';
import { REPORT_SCHEMA } from './report-types.js';

const RESULTS_DIR = fileURLToPath(new URL('../../bench/results/', import.meta.url));
const BASELINE_FILE = join(RESULTS_DIR, 'baseline-2core.json');

/** Chart.js's UMD build, without its source-map comment (nothing may be fetched at view time). */
export async function loadChartJs(): Promise<string> {
  const main = createRequire(import.meta.url).resolve('chart.js');
  const source = await readFile(join(dirname(main), 'chart.umd.min.js'), 'utf8');
  return source.replace(/^\/\/# sourceMappingURL=.*$/gm, '');
}

export async function readReport(file: string): Promise<BenchReport> {
  const parsed = JSON.parse(await readFile(file, 'utf8')) as BenchReport;
  const schema: unknown = parsed.schema;
  if (schema !== REPORT_SCHEMA) throw new Error(`${file}: report schema ${String(schema)}, expected ${REPORT_SCHEMA}`);
  return parsed;
}

async function newestResult(): Promise<string> {
  const names = existsSync(RESULTS_DIR) ? await readdir(RESULTS_DIR) : [];
  // Timestamps in the names sort chronologically.
  const runs = names.filter((n) => /^\d{4}-\d\d-\d\dT.*\.json$/.test(n)).sort();
  const newest = runs.pop();
  if (newest) return join(RESULTS_DIR, newest);
  if (existsSync(BASELINE_FILE)) return BASELINE_FILE;
  throw new Error(`no results in ${RESULTS_DIR}: run \`npm run bench\` first`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { input: { type: 'string' }, baseline: { type: 'string' }, out: { type: 'string' } },
  });
  const input = values.input ? resolve(values.input) : await newestResult();
  const baselineFile = values.baseline ? resolve(values.baseline) : existsSync(BASELINE_FILE) ? BASELINE_FILE : null;
  const report = await readReport(input);
  const baseline = baselineFile && baselineFile !== input ? await readReport(baselineFile) : null;
  const html = renderReportHtml(report, await loadChartJs(), { baseline });
  const out = values.out ? resolve(values.out) : join(RESULTS_DIR, 'report.html');
  await writeFile(out, html);
  process.stdout.write(`${out} (from ${input}${baseline ? `, compared with ${baselineFile}` : ''})\n`);
}

// Imported by the tests for loadChartJs/readReport: only run as the entry point.
if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:report: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
