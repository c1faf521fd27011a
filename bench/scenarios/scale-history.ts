/**
 * `scale:history`: reads at the tip of a long history. For each length, a linear history of that
 * many commits (one new file each) is built with `git fast-import` and pulled into a repository
 * from the local `git http-backend` (the sync scenario's fixture); then, in rounds over the
 * lengths, closed loops with a few connections time `GET …/changes?bookmark=main` (first page,
 * default limit) and `GET …/diff` between the tip and its parent. The fixture's tree grows with
 * its history (n files in 160 directories), so the diff also reads larger directories at larger
 * n. Skipped as "not available" when the server answers 404/405 on the upstream routes.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { waitForAnalytics } from '../analytics-settled.js';
import { createLargeRepo, gitAvailable, startGitServer } from '../git-server.js';
import type { StaticRequestSpec } from '../generator-protocol.js';
import { round, runPhase } from '../phases.js';
import type { PhaseResult } from '../report-types.js';
import { CurveBuilder, sizeName } from '../scale-curves.js';
import { waitForSync } from '../upstream-sync.js';
import type { ScaleOutcome } from './scale.js';
import type { ScenarioContext, ScenarioSettings } from './types.js';
import { requireTarget } from './types.js';

const NOT_AVAILABLE = new Set([404, 405]);
/** A pull of n commits may take this long per commit on a loaded machine before it counts as stuck. */
const PULL_MS_PER_COMMIT = 20;
const ANALYTICS_TIMEOUT_MS = 15 * 60_000;

export function historyParameters(s: ScenarioSettings): Record<string, string | number> {
  return { changes: s.scaleChanges.join(','), connections: s.scaleAgents, durationSec: s.scaleDurationMs / 1000, warmupSec: s.scaleWarmupMs / 1000 };
}

interface History {
  changes: number;
  repo: string;
  bookmark: string;
  tip: string;
  parent: string;
}

interface ChangeView {
  id: string;
  parents: string[];
  current_commit_oid: string;
}

/** Builds and pulls a history of `changes` commits; a string says why it is not available. */
async function pull(ctx: ScenarioContext, gitRoot: string, gitUrl: string, changes: number, metrics: Record<string, number>): Promise<History | string> {
  const { target, api } = requireTarget(ctx);
  const s = ctx.settings;
  const size = sizeName(changes);
  ctx.progress.log(`scale history: ${changes.toLocaleString('en-US')} commits (fast-import, then pull)`);
  let started = performance.now();
  const upstream = await createLargeRepo(gitRoot, `history-${changes}.git`, { commits: changes, filesPerCommit: 1 });
  metrics[`fastImportSec.${size}`] = round((performance.now() - started) / 1000, 1);

  api.setToken(await ctx.token());
  const repo = `${ctx.prefix}-history-${changes}`;
  await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
  const patched = await api.call('PATCH', api.repoPath(repo), { upstream: { url: `${gitUrl}/${upstream.name}` } });
  if (NOT_AVAILABLE.has(patched.status)) return `not available: PATCH …/{repo} with upstream answered ${patched.status}`;
  if (patched.status !== 200) throw new Error(`PATCH upstream → ${patched.status} ${patched.text.slice(0, 200)}`);
  started = performance.now();
  const created = await api.call<{ id?: string }>('POST', api.repoPath(repo, '/upstream/syncs'), { direction: 'pull' });
  if (NOT_AVAILABLE.has(created.status)) return `not available: POST …/upstream/syncs answered ${created.status}`;
  if (created.status !== 201 || typeof created.body !== 'object' || !created.body.id) throw new Error(`POST upstream/syncs → ${created.status} ${created.text.slice(0, 200)}`);
  const outcome = await waitForSync(api, repo, created.body.id, Math.max(s.syncTimeoutMs, changes * PULL_MS_PER_COMMIT));
  if (outcome.status !== 'completed') throw new Error(`pull of ${changes} commits ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
  metrics[`pullSec.${size}`] = round((performance.now() - started) / 1000, 1);

  // The pull moved the default bookmark: let its analytics finish before anything is timed.
  const analyticsSec = await waitForAnalytics(api, repo, Math.max(ANALYTICS_TIMEOUT_MS, changes * PULL_MS_PER_COMMIT));
  metrics[`analyticsSec.${size}`] = analyticsSec === null ? -1 : round(analyticsSec, 1);
  const page = await api.expect<{ changes: ChangeView[] }>(200, 'GET', api.repoPath(repo, `/changes?bookmark=${upstream.branch}`));
  const tip = page.changes[0];
  if (!tip || tip.current_commit_oid !== upstream.head || !tip.parents[0]) {
    throw new Error(`history of ${changes}: the first listed change is ${tip?.current_commit_oid ?? 'none'}, upstream head ${upstream.head}`);
  }
  return { changes, repo, bookmark: upstream.branch, tip: tip.id, parent: tip.parents[0] };
}

export async function runScaleHistory(ctx: ScenarioContext): Promise<ScaleOutcome | string> {
  const { target, api } = requireTarget(ctx);
  const s = ctx.settings;
  if (!(await gitAvailable())) return 'not available: git is not installed';
  const gitRoot = join(ctx.workDir, 'scale-git');
  await mkdir(gitRoot, { recursive: true });
  const git = await startGitServer({ root: gitRoot });
  const metrics: Record<string, number> = {};
  const histories: History[] = [];
  try {
    for (const changes of s.scaleChanges) {
      const got = await pull(ctx, gitRoot, git.url, changes, metrics);
      if (typeof got === 'string') return got;
      histories.push(got);
    }
  } finally {
    await git.close();
  }

  const list = new CurveBuilder('history-changes', 'GET …/changes?bookmark= (first page) vs changes on the bookmark', 'changes', 'ms');
  const diff = new CurveBuilder('history-diff', 'GET …/diff between the tip and its parent vs changes on the bookmark', 'changes', 'ms');
  const phases: PhaseResult[] = [];
  const rounds = histories.map(() => ({ list: [] as PhaseResult[], diff: [] as PhaseResult[] }));
  const one = async (h: History, label: string, path: string): Promise<PhaseResult> => {
    const request: StaticRequestSpec = { method: 'GET', path: api.repoPath(h.repo, path), headers: { Authorization: `Bearer ${await ctx.token()}` }, kind: 'read' };
    const out = await runPhase(ctx, {
      label,
      host: target.host,
      port: target.port,
      mode: 'closed',
      durationMs: s.scaleDurationMs,
      warmupMs: s.scaleWarmupMs,
      workload: { kind: 'static', slots: s.scaleAgents, requests: [request], expectStatus: 200 },
    });
    phases.push({ ...out.phase, label });
    return out.phase;
  };
  for (let r = 0; r < s.scaleRounds; r++) {
    for (const [i, h] of histories.entries()) {
      const name = `scale history ${sizeName(h.changes)}${s.scaleRounds > 1 ? ` round ${r + 1}` : ''}`;
      rounds[i]!.list.push(await one(h, `${name} changes`, `/changes?bookmark=${encodeURIComponent(h.bookmark)}`));
      rounds[i]!.diff.push(await one(h, `${name} diff`, `/diff?base_change_id=${h.parent}&head_change_id=${h.tip}`));
    }
  }
  for (const [i, h] of histories.entries()) {
    list.addLatency(null, h.changes, rounds[i]!.list);
    diff.addLatency(null, h.changes, rounds[i]!.diff);
  }
  const sizes = `${sizeName(s.scaleChanges[s.scaleChanges.length - 1]!)} ÷ ${sizeName(s.scaleChanges[0]!)} changes`;
  const target2x = (what: string) => ({ text: `${what}: p50 at 100k changes within 2× of p50 at 100; measured ${sizes}`, kind: 'growth' as const, limit: 2, series: ['p50'] });
  return {
    phases,
    curves: [list.build(target2x('first page')), diff.build(target2x('tip vs parent'))],
    metrics,
    verification: {
      ok: true,
      method: 'every pull completed and the first listed change of main is the upstream head commit (checked before timing)',
      checked: histories.length,
      failures: [],
    },
    problems: [],
  };
}
