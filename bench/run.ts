/**
 * `npm run bench`: starts the server (or targets `--url`), runs the selected scenarios with the
 * load generator in a separate process, writes `bench/results/<timestamp>.json` and prints a
 * summary. Exits non-zero when any scenario failed (errors, or lost writes on verification).
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import type { JWK } from 'jose';
import { ApiClient } from './api-client.js';
import { HELP, optionsForReport, parseOptions } from './options.js';
import type { BenchOptions } from './options.js';
import { ProgressReporter } from './progress.js';
import { startBenchCluster } from './cluster-target.js';
import { measureHop } from './cluster-hop.js';
import { buildClusterComparison, buildComparison } from './report-data.js';
import type { BenchReport, HopLatency, MethodInfo, ScenarioResult, WorkerRun } from './report-types.js';
import { REPORT_SCHEMA } from './report-types.js';
import { selectScenarios } from './scenarios/index.js';
import type { Selection } from './scenarios/index.js';
import { failedResult, resultBase } from './scenarios/result.js';
import type { ScenarioContext, Target } from './scenarios/types.js';
import { PROJECT_ROOT, createOrgAndKey, metricsUrlOf, serverBuilt, SERVER_ENTRY, startRepohost } from './server-process.js';
import { formatSummary } from './summary.js';
import { createSigner, tokenOrg } from './tokens.js';
import type { SigningKey } from './tokens.js';

const BENCH_ORG = 'bench';
/** Sequential GETs per path (owner, forwarding node) of the hop probe. */
const HOP_REQUESTS = 500;
const HOP_REQUESTS_SMOKE = 40;

const methodInfo = (generators: number, generator: 'node' | 'wrk'): MethodInfo => ({
  generator:
    `bench/load-generator.ts in ${generators} Node.js process(es) of its own per phase (child_process.fork; slots dealt round-robin, histograms merged); ` +
    'a minimal HTTP/1.1 client on net.Socket (bench/http-connection.ts), no pipelining' +
    (generator === 'wrk'
      ? `; closed-loop GET phases (hello, read, content) by wrk instead, ${generators} thread(s), a discarded warm-up run first, latency rebuilt from its 0.1 % percentiles (bench/wrk-generator.ts)`
      : ''),
  connectionReuse: 'keep-alive; one connection per slot (write scenarios: one per agent), opened before the clock starts',
  closedLoop:
    'each connection sends its next request as soon as the previous response is read; requests started after the warm-up and before the end are measured; req/s = measured / window',
  openLoop:
    'fixed arrival rate = open-fraction × the closed-loop req/s (agent-fleet, hot-repo: or each of --open-rates); arrival i is intended at t0 + i/rate and waits FIFO for a free connection; latency counts from the intended time (coordinated omission corrected), serviceTime from the actual send',
  histogram: 'hdr-histogram-js, microseconds, 3 significant digits, successful responses only (errors are counted separately)',
  placement: 'server, generator and orchestrator on the same machine, sharing its cores; no CPU pinning',
});

async function runSelections(ctx: ScenarioContext, selections: Selection[]): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const { scenario, variants } of selections) {
    for (const variant of variants) {
      try {
        results.push(await scenario.run(ctx, variant));
      } catch (err) {
        ctx.progress.log(`${scenario.name}${variant ? `/${variant}` : ''} failed: ${err instanceof Error ? err.message : String(err)}`);
        results.push(failedResult(resultBase(scenario, variant, {}), err));
      }
    }
  }
  return results;
}

function failAll(selections: Selection[], message: string): ScenarioResult[] {
  return selections.flatMap(({ scenario, variants }) =>
    variants.map((variant) => failedResult(resultBase(scenario, variant, {}), new Error(message))),
  );
}

async function runSpawned(opts: BenchOptions, base: Omit<ScenarioContext, 'target' | 'api' | 'key' | 'token'>, selections: Selection[], workers: number): Promise<WorkerRun> {
  if (!serverBuilt()) {
    return { workers, results: failAll(selections, `server not built: ${SERVER_ENTRY} is missing (npm run build)`) };
  }
  const dataDir = await mkdtemp(join(base.workDir, `data-w${workers}-`));
  const key = await createOrgAndKey(dataDir, BENCH_ORG);
  const sign = await createSigner(key);
  base.progress.log(`starting server: ${workers} worker(s), data ${dataDir}`);
  const server = await startRepohost({ dataDir, workers, logFile: join(base.workDir, `server-w${workers}.log`) });
  const api = new ApiClient(server.url, BENCH_ORG, await sign());
  try {
    const target: Target = { url: server.url, host: server.host, port: server.port, org: BENCH_ORG, workers, metricsUrl: metricsUrlOf(server) };
    const ctx: ScenarioContext = { ...base, target, api, key, token: () => sign() };
    const results = await runSelections(ctx, selections);
    if (results.some((r) => r.status === 'failed')) base.progress.log(`server log: ${server.logFile}`);
    return { workers, results };
  } finally {
    await api.close();
    await server.stop();
    if (!opts.keepData) await rm(dataDir, { recursive: true, force: true });
  }
}

/** The same scenarios against a local cluster, entered through its first node; then the hop probe. */
async function runCluster(opts: BenchOptions, base: Omit<ScenarioContext, 'target' | 'api' | 'key' | 'token'>, selections: Selection[], workers: number): Promise<WorkerRun> {
  const nodes = opts.cluster as number;
  base.progress.log(`starting a ${nodes}-node cluster (${opts.shardLog} shard log), ${workers} worker(s) per node`);
  const cluster = await startBenchCluster({ count: nodes, log: opts.shardLog, workers, workDir: base.workDir, org: BENCH_ORG });
  const sign = await createSigner(cluster.key);
  const entry = cluster.nodes[0] as (typeof cluster.nodes)[number];
  const api = new ApiClient(entry.url, BENCH_ORG, await sign());
  try {
    const target: Target = { url: entry.url, host: entry.host, port: entry.port, org: BENCH_ORG, workers, metricsUrl: null };
    const ctx: ScenarioContext = { ...base, target, api, key: cluster.key, token: () => sign() };
    const results = await runSelections(ctx, selections);
    let hop: HopLatency | null = null;
    try {
      const repo = `${base.prefix}-hop`;
      await api.expect(201, 'POST', `/v1/${BENCH_ORG}/repos`, { name: repo });
      hop = await measureHop(cluster.nodes, api.repoPath(repo), await sign(), opts.smoke ? HOP_REQUESTS_SMOKE : HOP_REQUESTS);
    } catch (err) {
      base.progress.log(`hop probe failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (results.some((r) => r.status === 'failed')) base.progress.log(`node logs: ${cluster.nodes.map((n) => n.logFile).join(', ')}`);
    return { workers, cluster: { nodes, shardLog: opts.shardLog, entry: entry.id, hop }, results };
  } finally {
    await api.close();
    await cluster.stop();
  }
}

async function runExternal(opts: BenchOptions, base: Omit<ScenarioContext, 'target' | 'api' | 'key' | 'token'>, selections: Selection[]): Promise<WorkerRun> {
  const url = new URL(opts.url as string);
  const token = opts.token as string;
  let key: SigningKey | null = null;
  if (opts.keyFile) {
    const parsed = JSON.parse(await readFile(opts.keyFile, 'utf8')) as { id: string; org?: string; private_key_jwk: JWK };
    key = { kid: parsed.id, org: parsed.org ?? tokenOrg(token), privateJwk: parsed.private_key_jwk };
  }
  const org = key?.org ?? tokenOrg(token);
  const sign = key ? await createSigner(key) : null;
  const host = url.hostname === 'localhost' ? '127.0.0.1' : url.hostname;
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (url.protocol !== 'http:') throw new Error('--url must be http:// (the generator speaks plain HTTP/1.1)');
  const api = new ApiClient(url.origin, org, token);
  try {
    const target: Target = { url: url.origin, host, port, org, workers: null, metricsUrl: null };
    const ctx: ScenarioContext = { ...base, target, api, key, token: async () => (sign ? sign() : token) };
    return { workers: null, results: await runSelections(ctx, selections) };
  } finally {
    await api.close();
  }
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return null;
  }
}

async function main(): Promise<number> {
  let opts: BenchOptions;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${HELP}`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(HELP);
    return 0;
  }
  let selections: Selection[];
  try {
    selections = selectScenarios(opts.scenarios);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }

  const startedAt = new Date();
  const loadAverageAtStart = os.loadavg();
  const workDir = await mkdtemp(join(os.tmpdir(), 'repohost-bench-'));
  const progress = new ProgressReporter(opts.progress);
  const base = { settings: opts.settings, progress, prefix: `b${Date.now().toString(36)}`, workDir };
  progress.log(`work directory ${workDir}`);

  const baselineSel = selections.filter((s) => !s.scenario.needsServer);
  const serverSel = selections.filter((s) => s.scenario.needsServer);
  const baseline = await runSelections({ ...base, target: null, api: null, key: null, token: () => Promise.reject(new Error('no server')) }, baselineSel);
  const runs: WorkerRun[] = [];
  if (serverSel.length > 0) {
    if (opts.url) {
      runs.push(await runExternal(opts, base, serverSel));
    } else {
      for (const workers of opts.sweepWorkers ?? [opts.workers]) {
        try {
          runs.push(await runSpawned(opts, base, serverSel, workers));
        } catch (err) {
          progress.log(`workers=${workers}: ${err instanceof Error ? err.message : String(err)}`);
          runs.push({ workers, results: failAll(serverSel, `server run failed: ${err instanceof Error ? err.message : String(err)}`) });
        }
      }
      if (opts.cluster !== null) {
        try {
          runs.push(await runCluster(opts, base, serverSel, opts.workers));
        } catch (err) {
          progress.log(`cluster: ${err instanceof Error ? err.message : String(err)}`);
          runs.push({ workers: opts.workers, cluster: { nodes: opts.cluster, shardLog: opts.shardLog, entry: 'n1', hop: null }, results: failAll(serverSel, `cluster run failed: ${err instanceof Error ? err.message : String(err)}`) });
        }
      }
    }
  }

  const cpus = os.cpus();
  const report: BenchReport = {
    schema: REPORT_SCHEMA,
    date: startedAt.toISOString(),
    wallTimeSec: Math.round((Date.now() - startedAt.getTime()) / 100) / 10,
    machine: {
      cpus: cpus.length,
      model: cpus[0]?.model.trim() ?? 'unknown',
      memoryBytes: os.totalmem(),
      platform: os.platform(),
      arch: os.arch(),
      release: os.release(),
      loadAverageAtStart,
    },
    node: { version: process.version, v8: process.versions.v8 },
    gitCommit: gitCommit(),
    method: methodInfo(opts.settings.generators, opts.settings.generator),
    target: { kind: opts.url ? 'external' : 'spawned', url: opts.url },
    options: optionsForReport(opts),
    baseline,
    runs,
    comparison: buildComparison(runs),
    ...(opts.cluster === null ? {} : { cluster: buildClusterComparison(runs) }),
    ok: [...baseline, ...runs.flatMap((r) => r.results)].every((r) => r.status !== 'failed'),
  };

  const outDir = opts.outDir ?? join(PROJECT_ROOT, 'bench', 'results');
  await mkdir(outDir, { recursive: true });
  const file = join(outDir, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`${formatSummary(report)}\n\nreport: ${file}\n`);
  // Kept on failure: the server and hello logs in it say why.
  if (!opts.keepData && report.ok) await rm(workDir, { recursive: true, force: true });
  else progress.log(`kept ${workDir}`);
  if (!report.ok) process.stderr.write('bench: FAILED (see the notes above)\n');
  return report.ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
