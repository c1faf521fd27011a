/**
 * `git-push`: git's own client pushing to repohost and to `git http-backend`. N clients (50) each
 * push one new commit of 3 files (2 KiB each) to a branch of their own, in a closed loop, against
 * one repository per server: pushes/s and latency per server, and their ratio (repohost ÷ git's
 * server; above 1 is more pushes per second). The commits are made beforehand with fast-import —
 * the same commits, in the same order, for both servers — so each loop step is one `git push`.
 *
 * Each server gets two rounds of half the duration, alternating. The phase is repohost's loop;
 * git's is in `byKind` (`push/git`) and the metrics.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { agentFileContent } from '../agent-files.js';
import { gitAvailable, startGitServer } from '../git-server.js';
import { createHistogram, encodeHistogram, summarize } from '../histogram.js';
import { round } from '../phases.js';
import type { KindResult, PhaseResult } from '../report-types.js';
import { finishResult, resultBase, skippedResult } from './result.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

type Server = 'repohost' | 'git';

function run(args: string[], cwd: string, input?: string): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('git', args, { cwd, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', HOME: cwd } });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => resolve({ ok: false, stdout, stderr: String(err) }));
    child.on('close', (code) => resolve({ ok: code === 0, stdout: stdout.trim(), stderr }));
    if (input === undefined) return;
    // A git that stops reading (it failed) reports why on stderr; the broken pipe adds nothing.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(input);
  });
}

async function ok(args: string[], cwd: string, input?: string): Promise<string> {
  const res = await run(args, cwd, input);
  if (!res.ok) throw new Error(`git ${args.slice(0, 3).join(' ')}: ${res.stderr.slice(0, 300)}`);
  return res.stdout;
}

/** A base commit, then for each client a chain of `length` commits on `c<i>`, each writing 3 files. */
async function buildChains(dir: string, clients: number, length: number, fileBytes: number): Promise<{ base: string; chains: string[][] }> {
  await ok(['init', '--quiet', '--bare', dir], dir);
  const parts: string[] = [];
  const data = (text: string): string => `data ${Buffer.byteLength(text)}\n${text}\n`;
  parts.push(`commit refs/heads/base\nmark :1\ncommitter Bench <bench@example.com> 1700000000 +0000\n${data('base')}M 100644 inline README\n${data('pushed by the git-push bench\n')}\n`);
  for (let c = 0; c < clients; c++) {
    for (let k = 0; k < length; k++) {
      parts.push(`commit refs/heads/c${c}\ncommitter Bench <bench@example.com> ${1_700_000_000 + k} +0000\n${data(`client ${c} push ${k}`)}`);
      if (k === 0) parts.push('from :1\n');
      for (let f = 0; f < 3; f++) parts.push(`M 100644 inline client-${c}/file-${f}.txt\n${data(agentFileContent(c, k, f, fileBytes))}`);
      parts.push('\n');
    }
  }
  await ok(['fast-import', '--quiet'], dir, parts.join(''));
  const base = await ok(['rev-parse', 'refs/heads/base'], dir);
  const chains: string[][] = [];
  for (let c = 0; c < clients; c++) chains.push((await ok(['rev-list', '--reverse', `refs/heads/c${c}`, '^refs/heads/base'], dir)).split('\n'));
  return { base, chains };
}

interface Loop {
  pushes: number;
  errors: number;
  errorSamples: string[];
  histogram: ReturnType<typeof createHistogram>;
  /** Per client: the next commit of its chain to push. */
  next: number[];
  /** Each client's last acknowledged commit. */
  acknowledged: string[];
  windowSec: number;
}

function newLoop(chains: string[][], base: string): Loop {
  return { pushes: 0, errors: 0, errorSamples: [], histogram: createHistogram(), next: chains.map(() => 0), acknowledged: chains.map(() => base), windowSec: 0 };
}

/**
 * One round: every client pushes the next commit of its chain as soon as its previous push
 * returned. The measured window starts once the warm-up has passed and every client has finished
 * a push of this round (a push takes seconds when 50 git clients share two cores): pushes that
 * finish inside the window count, with their latency.
 */
async function pushRound(loop: Loop, local: string, url: string, chains: string[][], warmupMs: number, durationMs: number): Promise<void> {
  const warmUntil = performance.now() + warmupMs;
  let window: { from: number; to: number } | null = null;
  let warm = 0;
  const warmed = (): void => {
    if (++warm === chains.length) {
      const from = Math.max(performance.now(), warmUntil);
      window = { from, to: from + durationMs };
    }
  };
  loop.windowSec += durationMs / 1000;
  await Promise.all(
    chains.map(async (chain, client) => {
      let first = true;
      while (loop.next[client]! < chain.length && (window === null || performance.now() < window.to)) {
        const commit = chain[loop.next[client]!]!;
        const started = performance.now();
        const res = await run(['push', '--quiet', url, `${commit}:refs/heads/c${client}`], local);
        const finished = performance.now();
        const measured = window !== null && finished >= window.from && finished <= window.to;
        if (first) {
          first = false;
          warmed();
        }
        if (!res.ok) {
          if (measured) loop.errors++;
          if (loop.errorSamples.length < 3) loop.errorSamples.push(res.stderr.trim().slice(0, 300));
          continue;
        }
        loop.acknowledged[client] = commit;
        loop.next[client]!++;
        if (!measured) continue;
        loop.pushes++;
        loop.histogram.recordValue(Math.max(1, Math.round((finished - started) * 1000)));
      }
    }),
  );
}

export const gitPush: Scenario = {
  name: 'git-push',
  description: 'N git clients each pushing one commit of 3 files to its own branch in a loop, to repohost vs git http-backend',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const { target, api } = requireTarget(ctx);
    const s = ctx.settings;
    const clients = s.pushClients;
    const base = resultBase(this, null, { clients, filesPerCommit: 3, fileBytes: s.writeFileBytes, durationSec: s.durationMs / 1000, warmupSec: s.warmupMs / 1000 });
    if (!(await gitAvailable())) return skippedResult(base, 'not available: git is not installed');

    const work = join(ctx.workDir, 'git-push');
    const served = join(work, 'served');
    const local = join(work, 'client.git');
    await mkdir(served, { recursive: true });
    await mkdir(local, { recursive: true });
    // Enough commits that no client runs out within the phase (a push takes well over 50 ms here).
    const length = Math.max(20, Math.ceil(((s.durationMs + 2 * s.warmupMs) / 1000) * 20));
    ctx.progress.log(`git-push: making ${clients} chains of ${length} commits`);
    const { base: baseCommit, chains } = await buildChains(local, clients, length, s.writeFileBytes);
    // git http-backend lets only authenticated users push (http.receivepack): the bridge asks for
    // Basic credentials, as repohost does, so both make git's 401 round trip.
    const git = await startGitServer({ root: served, users: { x: 'bench-password' } });
    try {
      const repo = `${ctx.prefix}-push`;
      await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
      const token = await ctx.token();
      const urls: Record<Server, string> = {
        repohost: `${target.url.replace('://', `://x:${token}@`)}/${target.org}/${repo}.git`,
        git: (await git.createRepo('push')).replace('://', '://x:bench-password@'),
      };
      for (const server of ['repohost', 'git'] as const) await ok(['push', '--quiet', urls[server], `${baseCommit}:refs/heads/main`], local);

      // Two rounds per server, in the order repohost, git, git, repohost: neither always meets the
      // machine busier or quieter (other load, a warmer page cache).
      const loops: Record<Server, Loop> = { repohost: newLoop(chains, baseCommit), git: newLoop(chains, baseCommit) };
      for (const server of ['repohost', 'git', 'git', 'repohost'] as const) {
        ctx.progress.log(`git-push: ${clients} clients pushing to ${server}`);
        await pushRound(loops[server], local, urls[server], chains, s.warmupMs, s.durationMs / 2);
      }

      // Every client's branch, on both servers, is at its last acknowledged push; a clone from repohost is sound.
      const failures: string[] = [];
      for (const server of ['repohost', 'git'] as const) {
        const listed = new Map((await ok(['ls-remote', urls[server]], local)).split('\n').map((line) => [line.split('\t')[1]!, line.split('\t')[0]!]));
        loops[server].acknowledged.forEach((tip, client) => {
          const at = listed.get(`refs/heads/c${client}`) ?? (tip === baseCommit ? baseCommit : undefined);
          if (at !== tip) failures.push(`${server}: c${client} is at ${at ?? 'nothing'}, the last acknowledged push was ${tip}`);
        });
      }
      const mirror = join(work, 'mirror.git');
      await ok(['clone', '--quiet', '--mirror', urls.repohost, mirror], work);
      const fsck = await run(['--git-dir', mirror, 'fsck', '--strict', '--no-progress'], work);
      if (!fsck.ok) failures.push(`git fsck of a clone from repohost: ${fsck.stderr.slice(0, 300)}`);

      const rate = (l: Loop): number => l.pushes / l.windowSec;
      const p99 = (l: Loop): number => summarize(l.histogram).p99;
      const metrics: Record<string, number> = {
        repohostPushesPerSec: round(rate(loops.repohost), 2),
        gitPushesPerSec: round(rate(loops.git), 2),
        throughputRatio: round(rate(loops.repohost) / Math.max(rate(loops.git), 1e-9), 2),
        repohostP99Ms: round(p99(loops.repohost), 1),
        gitP99Ms: round(p99(loops.git), 1),
        p99Ratio: round(p99(loops.repohost) / Math.max(p99(loops.git), 1e-9), 2),
      };
      const byKind: Record<string, KindResult> = {};
      for (const server of ['repohost', 'git'] as const) {
        const l = loops[server];
        byKind[`push/${server}`] = { requests: l.pushes, throughput: round(rate(l), 3), errors: l.errors, latency: summarize(l.histogram) };
      }
      const ours = loops.repohost;
      const phase: PhaseResult = {
        phase: 'closed',
        connections: clients,
        durationSec: ours.windowSec,
        warmupSec: s.warmupMs / 1000,
        targetRate: null,
        requests: ours.pushes,
        throughput: round(rate(ours), 3),
        errors: ours.errors + loops.git.errors,
        errorsByStatus: ours.errors + loops.git.errors > 0 ? { 'git push failed': ours.errors + loops.git.errors } : {},
        errorSamples: [...ours.errorSamples, ...loops.git.errorSamples].slice(0, 3),
        unsent: 0,
        latency: summarize(ours.histogram),
        serviceTime: null,
        byKind,
        generatorCpu: 0,
        histogram: encodeHistogram(ours.histogram),
      };
      return finishResult(base, [phase], {
        ok: failures.length === 0,
        method: "after each server's loop, every client's branch (git ls-remote) is at its last acknowledged push; git fsck --strict of a mirror clone from repohost",
        checked: clients * 2 + 1,
        failures,
      }, metrics);
    } finally {
      await git.close();
      await rm(work, { recursive: true, force: true });
    }
  },
};
