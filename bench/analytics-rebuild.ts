/**
 * Analytics cost on a 10,000-commit repository (API §10): how long a full rebuild and an
 * incremental update take in the analytics actor, and what a rebuild does to apply-ops latency
 * elsewhere on the server (p99 while the rebuild runs ÷ p99 idle).
 *
 *   node dist/bench/analytics-rebuild.js [--commits 10000] [--probes 4] [--workers 2] [--out file.json]
 *
 * Method: a real server on a temporary data directory (`startRepohost`). The history is written
 * through apply-ops, one commit per request on the default bookmark (every 3rd with attribution
 * trailers, every 5th by a token whose `author` claim is Claude; each edits one of 40 files,
 * +3 lines, 1 changed). Times are the actor's own: `_meta.lastSuccess − _meta.lastAttempt` of the
 * run (the scan interval is not in them; the end-to-end figure, write ack → status `current`, is
 * reported beside). A rebuild is forced from outside, as an operator would after an engine or
 * agent-table change: the analytics records are removed (cold: nothing reused) or the state is
 * marked `rebuilding` (warm: every kept per-commit result reused), then one more commit triggers
 * the actor. Latency probe: `--probes` clients, each writing apply-ops in a closed loop to its own
 * repository, measured idle for a fixed window and then for exactly the rebuild's duration.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { importJWK, SignJWT } from 'jose';
import { ApiClient } from './api-client.js';
import { createHistogram, summarize } from './histogram.js';
import type { Histogram } from './histogram.js';
import { createOrgAndKey, startRepohost } from './server-process.js';
import type { SigningKey } from './tokens.js';
import { openStorage } from '../src/storage/database.js';
import { K, Ranges } from '../src/storage/keys.js';

const ORG = 'bench';
const ROOT = 'z'.repeat(32);
const FILES = 40;

interface Args {
  commits: number;
  probes: number;
  workers: number;
  idleMs: number;
  out: string | null;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { commits: 10_000, probes: 4, workers: 2, idleMs: 5_000, out: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--commits') args.commits = Number(value);
    else if (flag === '--probes') args.probes = Number(value);
    else if (flag === '--workers') args.workers = Number(value);
    else if (flag === '--idle-ms') args.idleMs = Number(value);
    else if (flag === '--out') args.out = value;
    else throw new Error(`unknown option ${flag}`);
  }
  return args;
}

async function signer(key: SigningKey): Promise<(claims?: Record<string, unknown>) => Promise<string>> {
  const privateKey = await importJWK(key.privateJwk, 'EdDSA');
  return (claims = {}) =>
    new SignJWT({ scopes: ['admin'], ...claims })
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid })
      .setIssuer(key.org)
      .setAudience('repohost')
      .setIssuedAt()
      .setExpirationTime('4h')
      .sign(privateKey);
}

interface AnalyticsReply {
  status: string;
  analytics: { summary: { totalLines: number }; history: Array<{ sha: string }>; _meta: { lastAttempt: string; lastSuccess: string } } | null;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until the document is current at `headSha`; returns the run's own duration and the wait. */
async function waitCurrent(api: ApiClient, repo: string, headSha: string, since: number): Promise<{ runMs: number; endToEndMs: number }> {
  for (;;) {
    const res = await api.call<AnalyticsReply>('GET', api.repoPath(repo, '/analytics'));
    const a = res.body.analytics;
    if (res.body.status === 'current' && a && a.history[0]?.sha === headSha) {
      return { runMs: Date.parse(a._meta.lastSuccess) - Date.parse(a._meta.lastAttempt), endToEndMs: performance.now() - since };
    }
    await sleep(20);
  }
}

class Chain {
  private head = ROOT;
  private readonly files = new Map<string, string[]>();
  count = 0;
  constructor(
    private readonly api: ApiClient,
    readonly repo: string,
  ) {}

  /** One commit on the default bookmark; returns its commit oid. */
  async commit(extra: Record<string, unknown> = {}, token?: string): Promise<string> {
    const i = this.count++;
    const path = `src/module-${i % FILES}.ts`;
    const lines = this.files.get(path) ?? [];
    if (lines.length > 0) lines[(i * 7) % lines.length] = `export const changed${i} = ${i};`;
    lines.push(`// change ${i}`, `export function f${i}(x: number): number {`, `  return x + ${i};`, '}', '');
    this.files.set(path, lines);
    const body = { base_change_id: this.head, bookmarks: [{ name: 'main' }], message: `change ${i}`, ops: [{ op: 'write', path, content: lines.join('\n') }], ...extra };
    if (token) this.api.setToken(token);
    const res = await this.api.call<{ change: { id: string; current_commit_oid: string } }>('POST', this.api.repoPath(this.repo, '/apply-ops'), body);
    if (res.status !== 201) throw new Error(`apply-ops on ${this.repo}: ${res.status} ${res.text.slice(0, 300)}`);
    this.head = res.body.change.id;
    return res.body.change.current_commit_oid;
  }
}

/** Closed-loop apply-ops on the probe repositories until `stop()` resolves; latencies in µs. */
async function probe(clients: Array<{ api: ApiClient; chain: Chain }>, until: Promise<void>): Promise<Histogram> {
  const h = createHistogram();
  let done = false;
  void until.then(() => (done = true));
  await Promise.all(
    clients.map(async ({ chain }) => {
      while (!done) {
        const t0 = performance.now();
        await chain.commit();
        h.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
      }
    }),
  );
  return h;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const workDir = await mkdtemp(join(os.tmpdir(), 'repohost-bench-analytics-'));
  const dataDir = join(workDir, 'data');
  const key = await createOrgAndKey(dataDir, ORG);
  const sign = await signer(key);
  const server = await startRepohost({ dataDir, workers: args.workers, logFile: join(workDir, 'server.log') });
  const log = (msg: string): void => void process.stderr.write(`[analytics-bench] ${msg}\n`);
  try {
    const admin = await sign();
    const api = new ApiClient(server.url, ORG, admin);
    await api.expect(201, 'POST', `/v1/${ORG}/repos`, { name: 'big' });
    const claude = await sign({ author: [['Claude', 'noreply@anthropic.com']] });
    const big = new Chain(new ApiClient(server.url, ORG, admin), 'big');

    log(`writing ${args.commits} commits through apply-ops…`);
    const buildStart = performance.now();
    let head = '';
    for (let i = 0; i < args.commits; i++) {
      const byClaude = i % 5 === 4;
      const extra = i % 3 === 2 ? { attribution: { provider: 'claude_code', model: 'claude-sonnet-4-5' } } : {};
      head = await big.commit(extra, byClaude ? claude : admin);
      if ((i + 1) % 1000 === 0) log(`  ${i + 1} commits (${Math.round((performance.now() - buildStart) / 1000)} s)`);
    }
    const buildMs = performance.now() - buildStart;
    const settled = await waitCurrent(api, 'big', head, performance.now());
    log(`history written in ${Math.round(buildMs)} ms; analytics kept up incrementally (last run ${settled.runMs} ms)`);

    // ---- incremental updates on the 10,000-commit repository
    const incremental: Array<{ runMs: number; endToEndMs: number }> = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const sha = await big.commit({}, admin);
      incremental.push(await waitCurrent(api, 'big', sha, t0));
    }

    // ---- probes: repositories of their own
    const clients: Array<{ api: ApiClient; chain: Chain }> = [];
    for (let i = 0; i < args.probes; i++) {
      await api.expect(201, 'POST', `/v1/${ORG}/repos`, { name: `probe-${i}` });
      const probeApi = new ApiClient(server.url, ORG, admin);
      clients.push({ api: probeApi, chain: new Chain(probeApi, `probe-${i}`) });
    }
    for (const c of clients) for (let i = 0; i < 20; i++) await c.chain.commit();

    log(`idle probe for ${args.idleMs} ms…`);
    const idle = summarize(await probe(clients, sleep(args.idleMs)));

    const repoId = (await api.expect<{ id: string }>(200, 'GET', api.repoPath('big'))).id;
    // The server's own LMDB environment, opened beside it as the CLI does (multi-process safe).
    const storage = openStorage(dataDir);
    const forceRebuild = async (mode: 'cold' | 'warm'): Promise<{ runMs: number; endToEndMs: number; during: ReturnType<typeof summarize> }> => {
      if (mode === 'cold') {
        // Each remove's own promise settles with the batch, which is awaited.
        await storage.meta.batch(() => {
          for (const k of storage.meta.getKeys(Ranges.analyticsCommits(repoId))) void storage.meta.remove(k);
          void storage.meta.remove(K.analyticsState(repoId));
        });
      } else {
        const state = storage.meta.get(K.analyticsState(repoId)) as Record<string, unknown> | undefined;
        if (!state) throw new Error(`no analytics state for ${repoId} in ${dataDir}`);
        await storage.meta.put(K.analyticsState(repoId), { ...state, rebuilding: true });
      }
      const t0 = performance.now();
      const sha = await big.commit({}, admin);
      let finished!: () => void;
      const rebuilt = new Promise<void>((r) => (finished = r));
      const timing = waitCurrent(api, 'big', sha, t0).then((x) => {
        finished();
        return x;
      });
      const during = summarize(await probe(clients, rebuilt));
      return { ...(await timing), during };
    };
    log('cold rebuild (nothing reused) with the probe running…');
    const cold = await forceRebuild('cold');
    log('warm rebuild (kept per-commit results reused) with the probe running…');
    const warm = await forceRebuild('warm');
    await storage.close();

    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const result = {
      benchmark: 'analytics-rebuild',
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown', memGiB: Math.round(os.totalmem() / 2 ** 30) },
      node: process.version,
      parameters: args,
      buildMs: Math.round(buildMs),
      commits: big.count,
      incremental: { runMsMedian: median(incremental.map((x) => x.runMs)), endToEndMsMedian: Math.round(median(incremental.map((x) => x.endToEndMs))), runs: incremental },
      rebuild: {
        cold: { runMs: cold.runMs, endToEndMs: Math.round(cold.endToEndMs) },
        warm: { runMs: warm.runMs, endToEndMs: Math.round(warm.endToEndMs) },
      },
      applyOps: {
        idle,
        duringColdRebuild: cold.during,
        duringWarmRebuild: warm.during,
        p99RatioCold: Math.round((cold.during.p99 / idle.p99) * 100) / 100,
        p99RatioWarm: Math.round((warm.during.p99 / idle.p99) * 100) / 100,
      },
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (args.out) await writeFile(args.out, `${JSON.stringify(result, null, 2)}\n`);
    log(
      `${big.count} commits: cold rebuild ${cold.runMs} ms, warm rebuild ${warm.runMs} ms, incremental ${result.incremental.runMsMedian} ms ` +
        `(ack → current ${result.incremental.endToEndMsMedian} ms); apply-ops p99 idle ${idle.p99} ms, during cold rebuild ${cold.during.p99} ms ` +
        `(×${result.applyOps.p99RatioCold}), during warm rebuild ${warm.during.p99} ms (×${result.applyOps.p99RatioWarm})`,
    );
  } finally {
    await server.stop();
    await rm(workDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`[analytics-bench] failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
