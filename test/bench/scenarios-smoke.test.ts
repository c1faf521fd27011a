import '../helpers/child-env.js';
/**
 * Runs the whole bench on a tiny configuration (`--smoke`: ~1 s phases, 4 agents) against a real
 * server, so the bench cannot silently rot as the API evolves. Needs the built server.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { BenchReport, ScenarioResult } from '../../bench/report-types.js';
import { SCENARIOS } from '../../bench/scenarios/index.js';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));

// Two full bench runs: ~1.5 min on a quiet 2-core machine, several on a busy one (the scale
// family alone restarts its own servers four times: about 1.5 min at a load average of 20).
t.setTimeout(900_000);
const WRITE_SCENARIOS = new Set(['agent-fleet', 'hot-repo', 'mixed', 'webhooks']);

interface BenchRun {
  code: number;
  stdout: string;
  stderr: string;
  report: BenchReport;
}

async function bench(args: string[]): Promise<BenchRun> {
  const dir = await mkdtemp(join(os.tmpdir(), 'bench-smoke-'));
  try {
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [RUN, '--smoke', '--no-progress', '--out-dir', dir, ...args], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
    const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
    if (files.length !== 1) throw new Error(`expected one report in ${dir}, found ${files.length}; stderr: ${stderr.slice(-3000)}`);
    const report = JSON.parse(await readFile(join(dir, files[0] as string), 'utf8')) as BenchReport;
    return { code, stdout, stderr, report };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function results(report: BenchReport): ScenarioResult[] {
  return [...report.baseline, ...report.runs.flatMap((r) => r.results)];
}

// Every scenario and option (~100 s of both cores) with the long-test flag only: the default
// suite is at its time budget.
const options = process.env.REPOHOST_LONG_TESTS === '1' ? {} : { skip: 'the bench smoke: set REPOHOST_LONG_TESTS=1' };

t.test('bench smoke - every scenario runs for about a second and verifies its writes', options, async (t) => {
  // wrk drives the closed-loop reads here; the sweep below keeps them on the Node generator.
  const run = await bench(['--generator', 'wrk']);
  t.equal(run.code, 0, `bench exits 0 (stderr tail: ${run.stderr.slice(-2000)})`);
  t.match(run.stdout, /req\/s/, 'prints the summary table');
  t.equal(run.report.ok, true, 'report says every scenario passed');
  t.ok(run.report.machine.cpus > 0 && run.report.node.version.startsWith('v'), 'machine and node recorded');
  t.ok(run.report.method.openLoop.length > 0, 'method recorded');

  for (const scenario of SCENARIOS) {
    for (const variant of scenario.variants.length > 0 ? scenario.variants : [null]) {
      const label = variant ? `${scenario.name}/${variant}` : scenario.name;
      const found = results(run.report).find((r) => r.scenario === scenario.name && r.variant === variant);
      if (!found) {
        t.fail(`${label}: missing from the report`);
        continue;
      }
      if ((scenario.name === 'sync' || label === 'scale/history') && found.status === 'skipped') {
        t.match(found.note, /not available/, `${label}: skipped only as "not available"`);
        continue;
      }
      t.equal(found.status, 'ok', `${label}: ok (${found.note ?? ''})`);
      const closed = found.phases.find((p) => p.phase === 'closed');
      t.ok(closed && closed.throughput > 0, `${label}: closed loop measured a rate`);
      t.ok(closed && closed.latency.count > 0 && closed.histogram.length > 0, `${label}: latency histogram recorded`);
      if (WRITE_SCENARIOS.has(scenario.name)) {
        const open = found.phases.find((p) => p.phase === 'open');
        t.ok(open && open.targetRate !== null && open.targetRate > 0, `${label}: open loop ran at a fixed rate`);
        t.equal(found.verification?.ok, true, `${label}: writes verified`);
      }
      if (scenario.name === 'scale') {
        t.ok((found.curves?.length ?? 0) > 0, `${label}: curves recorded`);
        for (const c of found.curves ?? []) {
          t.ok(c.series.length > 0 && c.series.every((s) => s.points.length > 0), `${label} ${c.id}: every series has points`);
        }
        t.ok(found.phases.every((p) => p.label), `${label}: every point's phase is labelled`);
      }
    }
  }
  t.match(run.report.method.generator, /wrk/, 'the method names wrk');
  for (const [scenario, variant] of [['hello', null], ['read', 'reused-token'], ['content', 'raw']] as const) {
    const closed = results(run.report)
      .find((r) => r.scenario === scenario && r.variant === variant)
      ?.phases.find((p) => p.phase === 'closed');
    t.ok(closed && closed.errors === 0, `${scenario}: wrk measured without errors`);
    t.equal(closed?.latency.count, closed?.requests, `${scenario}: the histogram rebuilt from wrk's percentiles holds every request`);
  }
  const files = results(run.report).find((r) => r.scenario === 'scale' && r.variant === 'files');
  const write = files?.curves?.find((c) => c.id === 'files-apply-ops');
  t.same(write?.series.map((s) => s.label).sort(), ['deep p50', 'deep p99', 'flat p50', 'flat p99'], 'scale/files: both layouts timed');
  t.ok(write?.series.find((s) => s.label === 'deep p50')?.points.length === 2 && write.target?.outcomes[0]?.value !== null, 'scale/files: the deep curve has both sizes and is judged');
  t.equal(files?.verification?.ok, true, 'scale/files: the agents\' writes verified');
  const bytes = results(run.report).find((r) => r.scenario === 'scale' && r.variant === 'write-bytes');
  for (const figure of ['closed.writeBytesPerWrite', 'closed.lmdbPagesPerWrite', 'closed.flushedBatchesPerWrite', 'open.writeBytesPerWrite']) {
    t.ok((bytes?.metrics[figure] ?? 0) > 0, `scale/write-bytes: ${figure} recorded`);
  }
});


t.test('bench smoke - --sweep-workers restarts the server per worker count and compares', options, async (t) => {
  const run = await bench(['--scenarios', 'read:reused-token', '--sweep-workers', '1,2']);
  t.equal(run.code, 0, `bench exits 0 (stderr tail: ${run.stderr.slice(-2000)})`);
  t.same(run.report.runs.map((r) => r.workers), [1, 2], 'one run per worker count');
  const row = run.report.comparison.find((c) => c.scenario === 'read' && c.variant === 'reused-token' && c.phase === 'closed');
  t.ok(row && row.throughput['1'] !== undefined && row.throughput['2'] !== undefined, 'comparison has both worker counts');
  t.match(run.stdout, /by worker count/, 'prints the comparison');
});

t.test('bench smoke - --open-rates runs one labelled open loop per fixed rate', options, async (t) => {
  const run = await bench(['--scenarios', 'agent-fleet,hot-repo', '--open-rates', '40,20']);
  t.equal(run.code, 0, `bench exits 0 (stderr tail: ${run.stderr.slice(-2000)})`);
  for (const scenario of ['agent-fleet', 'hot-repo']) {
    const found = results(run.report).find((r) => r.scenario === scenario);
    const opens = found?.phases.filter((p) => p.phase === 'open') ?? [];
    t.same(opens.map((p) => [p.label, p.targetRate]), [['20/s', 20], ['40/s', 40]], `${scenario}: one phase per rate, ascending`);
    t.ok(opens.every((p) => p.latency.count > 0), `${scenario}: each rate measured latency`);
    t.equal(found?.parameters.openRates, '20,40', `${scenario}: the rates are in its parameters`);
    t.equal(found?.verification?.ok, true, `${scenario}: writes verified across every phase`);
    t.match(run.stdout, new RegExp(`${scenario}\\s+open 20/s`), `${scenario}: the summary names the rate`);
    // What the server counted: every figure read, pages written, and a batch's time after its
    // commands part of its time from the drain.
    for (const p of found?.phases ?? []) {
      const s = p.server;
      const name = `${scenario} ${p.label ?? p.phase}`;
      t.ok(s && Object.values(s).every((v) => Number.isFinite(v)), `${name}: every server figure read (${JSON.stringify(s)})`);
      t.ok(s && s.pagesPerWrite > 0 && s.kbPerWrite > 0, `${name}: pages written per call`);
      t.ok(s && s.commandsToReplyMsPerBatch <= s.drainToReplyMsPerBatch, `${name}: after the commands ≤ from the drain`);
    }
    for (const key of ['closedKbPerWrite', 'open20KbPerWrite', 'open40KbPerWrite']) t.ok((found?.metrics[key] ?? 0) > 0, `${scenario}: ${key} in the summary`);
  }
});
