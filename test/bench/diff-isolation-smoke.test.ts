/**
import '../helpers/child-env.js';
 * Runs bench/diff-isolation on a tiny configuration against a real server, so the script cannot
 * silently rot as the API evolves. Checks the result's shape only: timings on a shared machine
 * are the bench's to report, not a test's to assert. Needs the built server.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const SCRIPT = fileURLToPath(new URL('../../bench/diff-isolation.js', import.meta.url));

t.setTimeout(180_000);

t.test('diff-isolation runs on 200 files for a second per phase and writes its result', async (t) => {
  const dir = await mkdtemp(join(os.tmpdir(), 'diff-isolation-smoke-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const out = join(dir, 'result.json');
  const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [SCRIPT, '--files', '200', '--duration', '1', '--readers', '2', '--out', out], (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
  t.equal(code, 0, `exits 0 (stderr tail: ${stderr.slice(-2000)})`);
  const result = JSON.parse(await readFile(out, 'utf8'));
  t.same(JSON.parse(stdout), result, 'prints what it writes');
  t.match(result, {
    benchmark: 'diff-isolation',
    parameters: { readers: 2, duration: 1, files: 200, diffLoops: 2 },
    setup: { ms: Number, firstDiffMs: Number },
    p99Ratio: Number,
    busyP99Under20ms: Boolean,
  }, 'result fields');
  for (const phase of ['quiet', 'busy'] as const) {
    const { reads, readsPerSec, latency } = result[phase];
    t.ok(reads > 0 && readsPerSec > 0, `${phase}: reads counted`);
    t.equal(latency.count, reads, `${phase}: every read in the histogram`);
    t.match(latency, { p50: Number, p99: Number, max: Number }, `${phase}: latency summary`);
  }
  t.ok(result.busy.diffs.done > 0 && result.busy.diffs.msPerDiff > 0, 'diffs ran during the busy phase');
});
