/**
 * What large diffs cost the small reads (read-side target: "while a diff of 3,000 files runs, p99
 * of small metadata reads stays under 20 ms"): reader latency with the server quiet, then with
 * diffs of N modified files requested back to back. Reported as the ratio of the two p99s.
 *
 *   node dist/bench/diff-isolation.js [--readers 8] [--duration 10] [--workers 2] [--files 3000] [--out file.json]
 *
 * Method: a real server (`startRepohost`, temporary data directory). One repository holds a base
 * change of N small text files (8 lines) and a head change editing one line of every one of them,
 * written through apply-ops (≤ 10,000 ops per request); a second, one-file repository serves the
 * reads. Each reader is a closed loop on its own connection alternating `GET /v1/{org}/{repo}` and
 * `GET …/bookmarks/main`, after 20 unmeasured reads; latency from send to response in an HDR
 * histogram. Phase "quiet": the readers alone for D seconds. Phase "busy": the same for D seconds
 * while 2 loops request the JSON diff base → head back to back. The diff loops run on a worker
 * thread so that receiving and parsing their large responses never delays the readers' thread;
 * a diff still in flight when the phase ends is waited for and counted.
 */
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { ApiClient, mapLimit } from './api-client.js';
import { createHistogram, summarize } from './histogram.js';
import type { LatencySummary } from './report-types.js';
import { PROJECT_ROOT, createOrgAndKey, startRepohost } from './server-process.js';
import { createSigner } from './tokens.js';

const ORG = 'bench';
const ROOT = 'z'.repeat(32);
const MAX_OPS = 10_000; // API §5.4
const DIFF_LOOPS = 2;
const WARMUP_READS = 20;
const TARGET_P99_MS = 20;

interface DiffLoad {
  url: string;
  token: string;
  path: string;
}

type DiffReport = { done: number; totalMs: number };

const fileName = (i: number): string => `files/f${String(i).padStart(5, '0')}.txt`;
const fileContent = (i: number, edited: boolean): string =>
  Array.from({ length: 8 }, (_, line) => `file ${i} line ${line}${edited && line === 4 ? ' edited' : ''}\n`).join('');

/** Writes every file into one change on top of `base`: the first request creates it, the rest evolve it. */
async function writeChange(api: ApiClient, repo: string, base: string, files: number, edited: boolean): Promise<string> {
  let changeId: string | null = null;
  for (let from = 0; from < files; from += MAX_OPS) {
    // An explicit mode: without one, apply-ops looks each path up in its (large) directory.
    const ops = Array.from({ length: Math.min(MAX_OPS, files - from) }, (_, k) => ({
      op: 'write',
      path: fileName(from + k),
      content: fileContent(from + k, edited),
      encoding: 'utf-8',
      mode: '100644',
    }));
    const body = changeId === null ? { base_change_id: base, ops } : { change_id: changeId, ops };
    const res: { change: { id: string } } = await api.expect(changeId === null ? 201 : 200, 'POST', api.repoPath(repo, '/apply-ops'), body);
    changeId = res.change.id;
  }
  return changeId!;
}

/** The readers for `ms`, one closed loop each; every reader is its own client, hence its own connection. */
async function readPhase(readers: ApiClient[], paths: string[], ms: number): Promise<{ reads: number; readsPerSec: number; latency: LatencySummary }> {
  const histogram = createHistogram();
  const started = performance.now();
  const until = started + ms;
  await Promise.all(
    readers.map(async (api, r) => {
      for (let i = r; performance.now() < until; i++) {
        const t0 = performance.now();
        await api.expect(200, 'GET', paths[i % paths.length]!);
        histogram.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { reads: histogram.totalCount, readsPerSec: Math.round(histogram.totalCount / seconds), latency: summarize(histogram) };
}

/** Worker thread: DIFF_LOOPS closed loops on the diff until the parent says stop. */
async function diffLoops(load: DiffLoad): Promise<void> {
  const port = parentPort!;
  let running = true;
  port.once('message', () => (running = false));
  const report: DiffReport = { done: 0, totalMs: 0 };
  const loops = Array.from({ length: DIFF_LOOPS }, async () => {
    const api = new ApiClient(load.url, ORG, load.token);
    while (running) {
      const t0 = performance.now();
      await api.expect(200, 'GET', load.path);
      report.done++;
      report.totalMs += performance.now() - t0;
    }
    await api.close();
  });
  port.postMessage('running');
  await Promise.all(loops);
  port.postMessage(report);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { readers: { type: 'string' }, duration: { type: 'string' }, workers: { type: 'string' }, files: { type: 'string' }, out: { type: 'string' } },
  });
  const opts = {
    readers: Number(values.readers ?? 8),
    duration: Number(values.duration ?? 10),
    workers: Number(values.workers ?? 2),
    files: Number(values.files ?? 3000),
  };
  for (const [name, value] of Object.entries(opts)) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  }
  const log = (msg: string): void => void process.stderr.write(`[diff-isolation] ${msg}\n`);
  const startedAt = new Date();
  // Other work on the machine shows in the latencies; the load average says how much there was.
  const loadAtStart = os.loadavg()[0]!;
  const dir = await mkdtemp(join(os.tmpdir(), 'repohost-diff-isolation-'));
  const server = await startRepohost({ dataDir: join(dir, 'data'), workers: opts.workers, logFile: join(dir, 'server.log') });
  const readers: ApiClient[] = [];
  try {
    const token = await (await createSigner(await createOrgAndKey(join(dir, 'data'), ORG)))();
    const api = new ApiClient(server.url, ORG, token);

    log(`writing ${opts.files} files, then an edit of every one…`);
    const setupStart = performance.now();
    await api.expect(201, 'POST', `/v1/${ORG}/repos`, { name: 'big' });
    const base = await writeChange(api, 'big', ROOT, opts.files, false);
    const head = await writeChange(api, 'big', base, opts.files, true);
    await api.expect(201, 'POST', `/v1/${ORG}/repos`, { name: 'small' });
    await api.expect(201, 'POST', api.repoPath('small', '/apply-ops'), {
      base_change_id: ROOT,
      ops: [{ op: 'write', path: 'README.md', content: 'small\n', encoding: 'utf-8' }],
      bookmarks: [{ name: 'main' }],
    });
    const setupMs = Math.round(performance.now() - setupStart);

    // One diff up front: checks the set-up, and starts the server's read pool (started on first
    // use, so this time includes that start) before any phase.
    const diffPath = api.repoPath('big', `/diff?base_change_id=${base}&head_change_id=${head}`);
    const firstStart = performance.now();
    const first: { stats: { entries: number } } = await api.expect(200, 'GET', diffPath);
    const firstDiffMs = Math.round(performance.now() - firstStart);
    if (first.stats.entries !== opts.files) throw new Error(`diff lists ${first.stats.entries} entries, expected ${opts.files}`);
    const paths = [api.repoPath('small'), api.repoPath('small', '/bookmarks/main')];
    await api.close();
    for (let r = 0; r < opts.readers; r++) readers.push(new ApiClient(server.url, ORG, token));
    // Opens every reader's connection and warms the server's caches before any clock starts.
    await mapLimit(readers, opts.readers, async (reader) => {
      for (let i = 0; i < WARMUP_READS; i++) await reader.expect(200, 'GET', paths[i % paths.length]!);
    });

    log(`quiet: ${opts.readers} readers for ${opts.duration} s…`);
    const quiet = await readPhase(readers, paths, opts.duration * 1000);

    log(`busy: the same with ${DIFF_LOOPS} diff loops…`);
    const load: DiffLoad = { url: server.url, token, path: diffPath };
    const worker = new Worker(new URL(import.meta.url), { workerData: load });
    try {
      await once(worker, 'message');
      const busyReads = await readPhase(readers, paths, opts.duration * 1000);
      worker.postMessage('stop');
      const [diffs] = (await once(worker, 'message')) as [DiffReport];
      const busy = { ...busyReads, diffs: { done: diffs.done, msPerDiff: Math.round(diffs.totalMs / Math.max(1, diffs.done)) } };

      const result = {
        benchmark: 'diff-isolation',
        date: startedAt.toISOString(),
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown', memGiB: Math.round(os.totalmem() / 2 ** 30), loadAverage1m: { start: loadAtStart, end: os.loadavg()[0]! } },
        node: process.version,
        parameters: { ...opts, diffLoops: DIFF_LOOPS },
        setup: { ms: setupMs, firstDiffMs },
        quiet,
        busy,
        p99Ratio: Math.round((busy.latency.p99 / quiet.latency.p99) * 100) / 100,
        busyP99Under20ms: busy.latency.p99 < TARGET_P99_MS,
      };
      const text = `${JSON.stringify(result, null, 2)}\n`;
      const out = values.out ?? join(PROJECT_ROOT, 'bench', 'results', `diff-isolation-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
      if (!values.out) await mkdir(join(PROJECT_ROOT, 'bench', 'results'), { recursive: true });
      await writeFile(out, text);
      process.stdout.write(text);
      log(
        `reads p50/p99/max quiet ${quiet.latency.p50}/${quiet.latency.p99}/${quiet.latency.max} ms (${quiet.readsPerSec}/s), ` +
          `busy ${busy.latency.p50}/${busy.latency.p99}/${busy.latency.max} ms (${busy.readsPerSec}/s); ` +
          `${busy.diffs.done} diffs of ${opts.files} files, ${busy.diffs.msPerDiff} ms each; p99 ×${result.p99Ratio}, ` +
          `busy p99 ${result.busyP99Under20ms ? '<' : '≥'} ${TARGET_P99_MS} ms (written to ${out})`,
      );
    } finally {
      await worker.terminate();
    }
  } finally {
    await Promise.all(readers.map((r) => r.close()));
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (isMainThread) {
  await main().catch((err: unknown) => {
    process.stderr.write(`[diff-isolation] failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
} else {
  await diffLoops(workerData as DiffLoad);
}
