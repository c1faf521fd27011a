/**
 * `clone-isolation`: what full clones cost the writers (issue target: "8 concurrent clones while
 * agent-fleet writes at half its maximum leave the writes' p99 within 1.5× of the same writes
 * alone"). The agent-fleet workload (one repository per agent, apply-ops of three 2 KiB files)
 * runs closed-loop to find its maximum, then open-loop at half of it, alone and while 8 loops
 * each clone the sync fixture (git-clone's repository) back to back, in turn for
 * `--isolation-rounds` rounds. The figure is the ratio of the two p99s, each over its rounds,
 * beside the median of the rounds' own ratios.
 *
 * A clone here is what git sends for `git clone` of the fixture's branch (protocol v2 `fetch`,
 * `want` the tip, `done`) on its own connection, the whole pack read and dropped: the server
 * does all of a full clone's work, while the client does not run 8 `index-pack`s on the same
 * 2 cores, which would measure the clients instead of the server. The clients run on a thread
 * of the lowest priority, so that what they cost to read the packs does not weigh on the server.
 */
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';
import { prepareCloneFixture } from '../clone-fixture.js';
import type { CloneLoopsData, CloneLoopsResult } from '../clone-loop-worker.js';
import { cloneBody, cloneOnce } from '../clone-request.js';
import { gitAvailable } from '../git-server.js';
import { createHistogram, decodeHistogram, encodeHistogram, summarize } from '../histogram.js';
import { round, runPhase, startPhase } from '../phases.js';
import { median } from '../scale-curves.js';
import { counting, noCounters, type ServerCounters } from '../server-counters.js';
import type { PhaseResult } from '../report-types.js';
import { agentWorkload, createAgents, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { finishResult, resultBase, skippedResult } from './result.js';
import type { Scenario, ScenarioContext } from './types.js';
import { requireTarget } from './types.js';

const CLONE_LOOPS = 8;
/** The writes' open-loop rate, as a fraction of their closed-loop maximum. */
const WRITE_FRACTION = 0.5;
const TARGET_P99_RATIO = 1.5;

/** What the clone loops did, over every phase they ran in. */
interface CloneStats {
  clones: number;
  bytes: number;
  seconds: number;
  failures: string[];
  histogram: ReturnType<typeof createHistogram>;
}

/**
 * `CLONE_LOOPS` loops cloning back to back on a thread of their own (clone-loop-worker.ts) until
 * `stop`, which adds what they did to `stats`.
 */
function startCloneLoops(url: URL, token: string, tip: string, stats: CloneStats): { stop(): Promise<void> } {
  const data: CloneLoopsData = { url: url.href, token, body: cloneBody(tip), loops: CLONE_LOOPS };
  const worker = new Worker(new URL('../clone-loop-worker.js', import.meta.url), { workerData: data });
  const done = new Promise<CloneLoopsResult>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the clone loops' thread exited with code ${code} before reporting`)));
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      const result = await done;
      await worker.terminate();
      stats.clones += result.clones;
      stats.bytes += result.bytes;
      stats.seconds += result.seconds;
      stats.failures.push(...result.failures);
      stats.histogram.add(decodeHistogram(result.histogram));
    },
  };
}

/**
 * Commits, pages written and sync time per commit (both sides write at one rate for as long, so
 * their commits and pages compare directly): a clone that held its snapshot made every write
 * beside it take new pages instead of freed ones (docs/measurements/2026-11-28-clone-snapshots.md).
 */
function perCommit(side: 'Alone' | 'Beside', t: ServerCounters): Record<string, number> {
  if (!(t.transactions > 0)) return {};
  return {
    [`commits${side}`]: t.transactions,
    [`pagesPerCommit${side}`]: round(t.pagesWritten / t.transactions, 1),
    [`syncMsPerCommit${side}`]: round((t.syncSeconds * 1000) / t.transactions, 2),
  };
}

/** The p99 of several phases' latencies together. */
function mergedP99(phases: PhaseResult[]): number {
  const merged = createHistogram();
  for (const phase of phases) merged.add(decodeHistogram(phase.histogram));
  return summarize(merged).p99;
}

export const cloneIsolation: Scenario = {
  name: 'clone-isolation',
  description: `agent-fleet writes at ${WRITE_FRACTION} of their maximum, alone and beside ${CLONE_LOOPS} loops of full clones of the sync fixture`,
  variants: [],
  needsServer: true,
  async run(ctx: ScenarioContext) {
    const { target } = requireTarget(ctx);
    const s = ctx.settings;
    const base = resultBase(this, null, { ...writeParameters(ctx, s.agents), writeFraction: WRITE_FRACTION, cloneLoops: CLONE_LOOPS, rounds: s.isolationRounds, upstreamCommits: s.syncCommits });
    if (!(await gitAvailable())) return skippedResult(base, 'not available: git is not installed');
    const work = join(ctx.workDir, 'clone-isolation');
    const fixture = await prepareCloneFixture(ctx, 'isolation', work);
    try {
      // One clone first: it starts the server's read pool, which the loops must not wait for.
      const cloneUrl = new URL(`${target.url}/${target.org}/${fixture.repo}.git/git-upload-pack`);
      const first = await cloneOnce(cloneUrl, await ctx.token(), cloneBody(fixture.upstream.head));
      if (first.problem) throw new Error(`a clone of the fixture failed: ${first.problem}`);
      const { agents: created } = await createAgents(ctx, { count: s.agents, sharedRepo: null, repoPrefix: `${ctx.prefix}-iso`, seedFile: null });
      const endpoint = { host: target.host, port: target.port };
      const reads = { readRatio: 0, readPaths: [] };
      const closed = await runPhase(ctx, { label: 'clone-isolation writes closed', ...endpoint, mode: 'closed', workload: await agentWorkload(ctx, created, reads) });
      let agents = closed.raw.agents ?? created;
      const rate = closed.phase.throughput * WRITE_FRACTION;
      const token = await ctx.token();
      const stats: CloneStats = { clones: 0, bytes: 0, seconds: 0, failures: [], histogram: createHistogram() };
      const alone: PhaseResult[] = [];
      const beside: PhaseResult[] = [];
      const commitsAlone = noCounters();
      const commitsBeside = noCounters();
      // Alone and beside the clones in turn, so that other load on the machine falls on both.
      for (let r = 1; r <= s.isolationRounds; r++) {
        const workload = await agentWorkload(ctx, agents, reads);
        const quiet = await counting(target.metricsUrl, commitsAlone, () => runPhase(ctx, { label: `clone-isolation writes alone (${r})`, ...endpoint, mode: 'open', rate, workload }));
        agents = quiet.raw.agents ?? agents;
        alone.push(quiet.phase);
        const running = startPhase(ctx, { label: `clone-isolation writes beside ${CLONE_LOOPS} clone loops (${r})`, ...endpoint, mode: 'open', rate, workload: await agentWorkload(ctx, agents, reads) });
        // The clones start with the writers' warm-up, so the measured window sees them at full pace.
        await running.started;
        const loops = startCloneLoops(cloneUrl, token, fixture.upstream.head, stats);
        let busy: Awaited<typeof running.outcome>;
        try {
          busy = await counting(target.metricsUrl, commitsBeside, () => running.outcome);
        } finally {
          await loops.stop();
        }
        agents = busy.raw.agents ?? agents;
        beside.push(busy.phase);
      }

      const aloneP99 = mergedP99(alone);
      const besideP99 = mergedP99(beside);
      const ratio = aloneP99 > 0 ? besideP99 / aloneP99 : 0;
      // A round without a p99 on either side measured nothing: no ratio, and a problem below.
      const roundRatios = alone.map((quiet, i) => (quiet.latency.p99 > 0 && beside[i]!.latency.p99 > 0 ? beside[i]!.latency.p99 / quiet.latency.p99 : null));
      const measured = roundRatios.filter((r) => r !== null);
      // A stall in one round of the writes alone (seen now and then, clones or not) makes the pooled
      // ratio meaningless; it moves the median of the rounds' ratios by one rank only.
      const medianRatio = median(measured);
      const clonesPerSec = stats.seconds > 0 ? stats.clones / stats.seconds : 0;
      ctx.progress.log(
        `clone-isolation: write p99 ${aloneP99} ms alone, ${besideP99} ms beside ${stats.clones} clones (${round(clonesPerSec, 2)}/s): ×${round(ratio, 2)}, median of ${measured.length} rounds ×${round(medianRatio, 2)} (target ≤ ${TARGET_P99_RATIO})`,
      );
      const clonePhase: PhaseResult = {
        phase: 'closed',
        connections: CLONE_LOOPS,
        durationSec: round(stats.seconds, 3),
        warmupSec: 0,
        targetRate: null,
        requests: stats.clones,
        throughput: round(clonesPerSec, 3),
        errors: stats.failures.length,
        errorsByStatus: {},
        errorSamples: stats.failures.slice(0, 3),
        unsent: 0,
        latency: summarize(stats.histogram),
        serviceTime: null,
        byKind: {},
        generatorCpu: 0,
        histogram: encodeHistogram(stats.histogram),
      };
      const verification = await verifyAgents(ctx, agents);
      const problems = [
        ...(stats.clones === 0 ? ['no clone completed beside the writes'] : []),
        ...(measured.length < roundRatios.length ? [`${roundRatios.length - measured.length} round(s) measured no p99 alone or beside`] : []),
      ];
      return finishResult(
        base,
        [closed.phase, ...alone, ...beside, clonePhase],
        verification,
        {
          writeMaxRate: round(closed.phase.throughput, 1),
          writeRate: round(rate, 1),
          aloneP99Ms: aloneP99,
          besideClonesP99Ms: besideP99,
          p99Ratio: round(ratio, 2),
          p99RatioMedianOfRounds: round(medianRatio, 2),
          ...Object.fromEntries(roundRatios.flatMap((r, i) => (r === null ? [] : [[`p99RatioRound${i + 1}`, round(r, 2)]]))),
          ...perCommit('Alone', commitsAlone),
          ...perCommit('Beside', commitsBeside),
          clones: stats.clones,
          clonesPerSec: round(clonesPerSec, 2),
          cloneMedianMs: round(summarize(stats.histogram).p50, 1),
          cloneMiB: round(stats.clones > 0 ? stats.bytes / stats.clones / 2 ** 20 : 0, 2),
          acknowledgedWrites: totalWrites(agents),
        },
        problems,
      );
    } finally {
      await fixture.git.close();
      await rm(work, { recursive: true, force: true });
    }
  },
};
