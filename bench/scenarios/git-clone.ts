/**
 * `git-clone`: git's own client against repohost and against `git http-backend`, both serving
 * the sync fixture (2,000 commits, about 6,000 files, pulled into repohost so the oids are the
 * same): a full clone, a `--depth 1` clone, and a fetch of one new commit, each timed on both
 * servers in alternating order, round after round. The figures are the medians and their ratio
 * (repohost ÷ git's server; below 1 is faster). Clones are `--bare`: checking out the same files
 * is the same client work on both sides and would only blur the ratio.
 *
 * The single phase records every timed operation as a request of its kind (`full/repohost`,
 * `full/git`, …), so the report's histograms and latency table carry the distributions.
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { prepareCloneFixture } from '../clone-fixture.js';
import { appendCommit, gitAvailable } from '../git-server.js';
import { createHistogram, encodeHistogram, summarize } from '../histogram.js';
import { round } from '../phases.js';
import type { KindResult, PhaseResult } from '../report-types.js';
import { finishResult, resultBase, skippedResult } from './result.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

type Server = 'repohost' | 'git';
type Operation = 'full' | 'depth1' | 'incremental';
const SERVERS: readonly Server[] = ['repohost', 'git'];
const OPERATIONS: readonly Operation[] = ['full', 'depth1', 'incremental'];

function run(args: string[], cwd: string): Promise<{ ok: boolean; stderr: string; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn('git', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', HOME: cwd } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => resolve({ ok: false, stderr: String(err), ms: 0 }));
    child.on('close', (code) => resolve({ ok: code === 0, stderr, ms: performance.now() - started }));
  });
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export const gitClone: Scenario = {
  name: 'git-clone',
  description: 'git clone (full, --depth 1) and a one-commit fetch from repohost vs git http-backend serving the same repository',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const { target } = requireTarget(ctx);
    const s = ctx.settings;
    const base = resultBase(this, null, { upstreamCommits: s.syncCommits, filesPerCommit: s.syncFilesPerCommit, rounds: s.cloneRounds, clone: '--bare' });
    if (!(await gitAvailable())) return skippedResult(base, 'not available: git is not installed');

    const work = join(ctx.workDir, 'git-clone');
    const { upstream, gitRoot, git, repo, pull } = await prepareCloneFixture(ctx, 'clone', work);
    try {
      const token = await ctx.token();
      const urls: Record<Server, string> = {
        repohost: `${target.url.replace('://', `://x:${token}@`)}/${target.org}/${repo}.git`,
        git: `${git.url}/${upstream.name}`,
      };
      const timings = new Map<string, number[]>();
      const histogram = createHistogram();
      const byKindHistograms = new Map<string, ReturnType<typeof createHistogram>>();
      const failures: string[] = [];
      const timed = async (operation: Operation, server: Server, args: string[]): Promise<void> => {
        const res = await run(args, work);
        if (!res.ok) {
          failures.push(`${operation} from ${server}: ${res.stderr.trim().slice(0, 300)}`);
          return;
        }
        const kind = `${operation}/${server}`;
        timings.set(kind, [...(timings.get(kind) ?? []), res.ms]);
        const us = Math.max(1, Math.round(res.ms * 1000));
        histogram.recordValue(us);
        let h = byKindHistograms.get(kind);
        if (!h) byKindHistograms.set(kind, (h = createHistogram()));
        h.recordValue(us);
      };

      // The incremental fetch's clients: mirrors taken now, each fetching one new commit per round.
      const mirrors: Record<Server, string> = { repohost: join(work, 'mirror-repohost.git'), git: join(work, 'mirror-git.git') };
      for (const server of SERVERS) {
        const res = await run(['clone', '--quiet', '--mirror', urls[server], mirrors[server]], work);
        if (!res.ok) throw new Error(`mirror clone from ${server}: ${res.stderr}`);
      }

      const started = performance.now();
      let head = upstream.head;
      for (let r = 0; r < s.cloneRounds; r++) {
        ctx.progress.log(`git-clone: round ${r + 1} of ${s.cloneRounds}`);
        // Alternate who goes first, so neither always meets a warmer page cache.
        const order = r % 2 === 0 ? SERVERS : [...SERVERS].reverse();
        for (const server of order) {
          const dir = join(work, `full-${server}.git`);
          await rm(dir, { recursive: true, force: true });
          await timed('full', server, ['clone', '--quiet', '--bare', urls[server], dir]);
        }
        for (const server of order) {
          const dir = join(work, `depth1-${server}.git`);
          await rm(dir, { recursive: true, force: true });
          await timed('depth1', server, ['clone', '--quiet', '--bare', '--depth', '1', urls[server], dir]);
        }
        head = await appendCommit(gitRoot, upstream.name, { branch: upstream.branch, path: `dir-${r % 32}/round-${r}.txt`, content: `round ${r}\n`, message: `round ${r}\n` });
        await pull();
        for (const server of order) await timed('incremental', server, ['--git-dir', mirrors[server], 'fetch', '--quiet', 'origin']);
      }
      const windowSec = (performance.now() - started) / 1000;

      const metrics: Record<string, number> = {};
      for (const operation of OPERATIONS) {
        const ours = timings.get(`${operation}/repohost`) ?? [];
        const theirs = timings.get(`${operation}/git`) ?? [];
        if (ours.length === 0 || theirs.length === 0) continue;
        metrics[`${operation}RepohostMs`] = round(median(ours), 1);
        metrics[`${operation}GitMs`] = round(median(theirs), 1);
        metrics[`${operation}Ratio`] = round(median(ours) / median(theirs), 2);
      }

      // Both servers' clients must end where the upstream is, and a clone from repohost must be sound.
      for (const server of SERVERS) {
        const tip = await new Promise<string>((resolve) => {
          const child = spawn('git', ['--git-dir', mirrors[server], 'rev-parse', `refs/heads/${upstream.branch}`]);
          let out = '';
          child.stdout.on('data', (d: Buffer) => (out += d.toString()));
          child.on('close', () => resolve(out.trim()));
        });
        if (tip !== head) failures.push(`${server} mirror is at ${tip}, the upstream at ${head}`);
      }
      const fsck = await run(['--git-dir', join(work, 'full-repohost.git'), 'fsck', '--strict', '--no-progress'], work);
      if (!fsck.ok) failures.push(`git fsck of the clone from repohost: ${fsck.stderr.slice(0, 300)}`);

      const byKind: Record<string, KindResult> = {};
      for (const [kind, h] of byKindHistograms) {
        byKind[kind] = { requests: h.totalCount, throughput: round(h.totalCount / windowSec, 3), errors: 0, latency: summarize(h) };
      }
      const phase: PhaseResult = {
        phase: 'closed',
        connections: 1,
        durationSec: round(windowSec, 3),
        warmupSec: 0,
        targetRate: null,
        requests: histogram.totalCount,
        throughput: round(histogram.totalCount / windowSec, 3),
        errors: failures.length,
        errorsByStatus: {},
        errorSamples: failures.slice(0, 3),
        unsent: 0,
        latency: summarize(histogram),
        serviceTime: null,
        byKind,
        generatorCpu: 0,
        histogram: encodeHistogram(histogram),
      };
      return finishResult(base, [phase], {
        ok: failures.length === 0,
        method: 'every timed git command exited 0; both mirrors reached the upstream head after the last incremental fetch; git fsck --strict of the last full clone from repohost',
        checked: histogram.totalCount + SERVERS.length + 1,
        failures,
      }, metrics);
    } finally {
      await git.close();
      await rm(work, { recursive: true, force: true });
    }
  },
};
