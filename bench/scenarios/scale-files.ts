/**
 * `scale:files`: what one file costs as the repository grows. For each file count and layout
 * (flat, 8 levels deep), closed loops with a few connections time
 * - apply-ops: each agent rewrites its own file (`agents/a<i>/file-0.txt`) on its own bookmark,
 *   on top of its previous change, starting from the repository's tip;
 * - GET …/content of one file at the deepest level (16 files spread over the tree, raw bytes);
 * - GET …/diff between the tip and a change that rewrote one file at the deepest level.
 * Every repository is built first, so all points see the same data directory; then every point
 * is measured once per round, in turn, and a curve takes the median of its rounds.
 */
import type { AgentState, StaticRequestSpec } from '../generator-protocol.js';
import { waitForAnalytics } from '../analytics-settled.js';
import { runPhase } from '../phases.js';
import type { PhaseResult, Verification } from '../report-types.js';
import { CurveBuilder, sizeName } from '../scale-curves.js';
import { buildRepo, DEPTH, layoutContent, layoutPath } from '../scale-layout.js';
import type { Layout } from '../scale-layout.js';
import { verifyAgents } from './agent-writes.js';
import type { ScaleOutcome } from './scale.js';
import type { ScenarioContext, ScenarioSettings } from './types.js';
import { requireTarget } from './types.js';

const READ_FILES = 16;
const ANALYTICS_TIMEOUT_MS = 15 * 60_000;

interface Fixture {
  layout: Layout;
  files: number;
  repo: string;
  chain: string[];
  probe: string;
  probePath: string;
  readPaths: number[];
}

export function filesParameters(s: ScenarioSettings): Record<string, string | number> {
  return {
    files: s.scaleFiles.join(','),
    flatUpTo: s.scaleFlatMaxFiles,
    depth: DEPTH,
    agents: s.scaleAgents,
    fileBytesWritten: s.writeFileBytes,
    durationSec: s.scaleDurationMs / 1000,
    warmupSec: s.scaleWarmupMs / 1000,
  };
}

function layoutsFor(s: ScenarioSettings, files: number): Layout[] {
  return files <= s.scaleFlatMaxFiles ? ['deep', 'flat'] : ['deep'];
}

async function build(ctx: ScenarioContext, layout: Layout, files: number): Promise<{ fixture: Fixture; seconds: number; analyticsSec: number | null }> {
  const { target, api } = requireTarget(ctx);
  const repo = `${ctx.prefix}-files-${layout}-${files}`;
  await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
  // Long builds outlive a token: sign a fresh one per request (a no-op with a fixed --token).
  const built = await buildRepo(api, repo, 'main', layout, files, async () => api.setToken(await ctx.token()));
  const tip = built.chain[built.chain.length - 1]!;
  const probeIndex = Math.floor(files / 2);
  const probePath = layoutPath(layout, files, probeIndex);
  const probe = await api.expect<{ change: { id: string } }>(201, 'POST', api.repoPath(repo, '/apply-ops'), {
    base_change_id: tip,
    message: 'scale probe: one file rewritten',
    ops: [{ op: 'write', path: probePath, content: layoutContent(probeIndex, 1), encoding: 'utf-8' }],
    bookmarks: [{ name: 'probe', create: true }],
  });
  for (let i = 0; i < ctx.settings.scaleAgents; i++) {
    await api.expect(201, 'POST', api.repoPath(repo, '/bookmarks'), { name: `agent-${i}`, change_id: tip });
  }
  const readPaths = Array.from({ length: Math.min(READ_FILES, files) }, (_, k) => Math.floor((k * files) / Math.min(READ_FILES, files)));
  // The build moved the default bookmark: let its analytics finish before anything is timed.
  const analyticsSec = await waitForAnalytics(api, repo, ANALYTICS_TIMEOUT_MS);
  return { fixture: { layout, files, repo, chain: built.chain, probe: probe.change.id, probePath, readPaths }, seconds: built.seconds, analyticsSec };
}

/** The reads return what the fixture wrote before anything is timed (no fast 404 benchmarked). */
async function checkReads(ctx: ScenarioContext, f: Fixture): Promise<string[]> {
  const { api } = requireTarget(ctx);
  const tip = f.chain[f.chain.length - 1]!;
  const problems: string[] = [];
  for (const i of f.readPaths) {
    const path = layoutPath(f.layout, f.files, i);
    const res = await api.call('GET', api.repoPath(f.repo, `/content?path=${encodeURIComponent(path)}&change_id=${tip}`), undefined, 'application/octet-stream');
    if (res.status !== 200 || res.text !== layoutContent(i)) problems.push(`${f.repo} ${path}: ${res.status}, ${res.text === layoutContent(i) ? 'same' : 'other'} bytes`);
  }
  const diff = await api.call<{ entries?: Array<{ path: string; status: string }> }>('GET', api.repoPath(f.repo, `/diff?base_change_id=${tip}&head_change_id=${f.probe}`));
  const entries = typeof diff.body === 'object' ? diff.body.entries : undefined;
  if (diff.status !== 200 || entries?.length !== 1 || entries[0]?.path !== f.probePath || entries[0]?.status !== 'modified') {
    problems.push(`${f.repo} diff tip → probe: ${diff.status} ${diff.text.slice(0, 200)}`);
  }
  return problems;
}

interface Measured {
  write: PhaseResult;
  content: PhaseResult;
  diff: PhaseResult;
}

/** One round of a point: the three phases, the agents carrying on from where they stopped. */
async function measure(ctx: ScenarioContext, f: Fixture, agents: AgentState[], round: number): Promise<Measured & { agents: AgentState[] }> {
  const { target, api } = requireTarget(ctx);
  const s = ctx.settings;
  const tip = f.chain[f.chain.length - 1]!;
  const name = `scale files ${f.layout} ${sizeName(f.files)}${s.scaleRounds > 1 ? ` round ${round + 1}` : ''}`;
  const timing = { host: target.host, port: target.port, mode: 'closed' as const, durationMs: s.scaleDurationMs, warmupMs: s.scaleWarmupMs };
  const token = await ctx.token();
  const write = await runPhase(ctx, {
    label: `${name} apply-ops`,
    ...timing,
    workload: { kind: 'agents', org: target.org, token, agents, files: 1, fileBytes: s.writeFileBytes, readRatio: 0, readPaths: [] },
  });
  const get = (path: string, kind: string, accept: string): StaticRequestSpec => ({
    method: 'GET',
    path: api.repoPath(f.repo, path),
    headers: { Authorization: `Bearer ${token}`, Accept: accept },
    kind,
  });
  const content = await runPhase(ctx, {
    label: `${name} content`,
    ...timing,
    workload: {
      kind: 'static',
      slots: s.scaleAgents,
      requests: f.readPaths.map((i) => get(`/content?path=${encodeURIComponent(layoutPath(f.layout, f.files, i))}&change_id=${tip}`, 'content', 'application/octet-stream')),
      expectStatus: 200,
    },
  });
  const diff = await runPhase(ctx, {
    label: `${name} diff`,
    ...timing,
    workload: { kind: 'static', slots: s.scaleAgents, requests: [get(`/diff?base_change_id=${tip}&head_change_id=${f.probe}`, 'diff', 'application/json')], expectStatus: 200 },
  });
  return {
    write: { ...write.phase, label: `${name} apply-ops` },
    content: { ...content.phase, label: `${name} content` },
    diff: { ...diff.phase, label: `${name} diff` },
    agents: write.raw.agents ?? agents,
  };
}

export async function runScaleFiles(ctx: ScenarioContext): Promise<ScaleOutcome> {
  const s = ctx.settings;
  const metrics: Record<string, number> = {};
  const fixtures: Fixture[] = [];
  for (const files of s.scaleFiles) {
    for (const layout of layoutsFor(s, files)) {
      ctx.progress.log(`scale files: building ${layout} ${files.toLocaleString('en-US')} files`);
      const { fixture, seconds, analyticsSec } = await build(ctx, layout, files);
      metrics[`buildSec.${layout}.${sizeName(files)}`] = Math.round(seconds * 10) / 10;
      // How long the background analytics of the fresh fixture took (-1: not done in time).
      metrics[`analyticsSec.${layout}.${sizeName(files)}`] = analyticsSec === null ? -1 : Math.round(analyticsSec * 10) / 10;
      fixtures.push(fixture);
    }
  }
  const problems = (await Promise.all(fixtures.map((f) => checkReads(ctx, f)))).flat();
  if (problems.length > 0) return { phases: [], curves: [], metrics, verification: null, problems: [`fixture read back wrong: ${problems.slice(0, 3).join('; ')}`] };

  const curves = {
    write: new CurveBuilder('files-apply-ops', 'apply-ops of one file vs files in the repository', 'files', 'ms'),
    content: new CurveBuilder('files-content', 'GET …/content of one file vs files in the repository', 'files', 'ms'),
    diff: new CurveBuilder('files-diff', 'GET …/diff of a one-file change vs files in the repository', 'files', 'ms'),
  };
  const phases: PhaseResult[] = [];
  const agents = fixtures.map((f) =>
    Array.from({ length: s.scaleAgents }, (_, index): AgentState => ({
      index,
      repo: f.repo,
      bookmark: `agent-${index}`,
      lastChangeId: f.chain[f.chain.length - 1]!,
      writes: 0,
      // The bookmark's history below the agent's own writes: the fixture's changes.
      chain: [...f.chain],
    })),
  );
  const rounds: Measured[][] = fixtures.map(() => []);
  for (let round = 0; round < s.scaleRounds; round++) {
    for (const [i, f] of fixtures.entries()) {
      const m = await measure(ctx, f, agents[i]!, round);
      agents[i] = m.agents;
      rounds[i]!.push(m);
      phases.push(m.write, m.content, m.diff);
    }
  }
  const checks: Verification[] = [];
  for (const [i, f] of fixtures.entries()) {
    const ms = rounds[i]!;
    curves.write.addLatency(f.layout, f.files, ms.map((m) => m.write));
    curves.content.addLatency(f.layout, f.files, ms.map((m) => m.content));
    curves.diff.addLatency(f.layout, f.files, ms.map((m) => m.diff));
    checks.push(await verifyAgents(ctx, agents[i]!));
  }
  const sizes = `${sizeName(s.scaleFiles[s.scaleFiles.length - 1]!)} ÷ ${sizeName(s.scaleFiles[0]!)} files`;
  const target = (what: string) => ({
    text: `${what}: p50 at 1M files within 3× of p50 at 1k, 8 levels deep (O(depth × directory size)); measured ${sizes}. Flat is shown, not judged: its one directory holds every file`,
    kind: 'growth' as const,
    limit: 3,
    series: ['deep p50'],
  });
  return {
    phases,
    curves: [curves.write.build(target('apply-ops')), curves.content.build(target('content')), curves.diff.build(target('diff'))],
    metrics,
    verification: {
      ok: checks.every((c) => c.ok),
      method: `per point, before timing: up to ${READ_FILES} files read back and the probe diff lists exactly its one file; after: ${checks[0]?.method ?? ''} (the agents' bookmarks start at the fixture's tip)`,
      checked: checks.reduce((n, c) => n + c.checked, 0),
      failures: checks.flatMap((c) => c.failures),
    },
    problems: [],
  };
}
