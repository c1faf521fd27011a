/**
 * What the write scenarios share: creating agents (repositories and bookmarks), the closed loop
 * followed by an open loop at a fraction of its maximum, and the check that no acknowledged write
 * was lost — every bookmark must point at its agent's last acknowledged change, and that change
 * must serve the bytes the agent last wrote.
 */
import { agentFileContent, agentFilePath } from '../agent-files.js';
import { mapLimit } from '../api-client.js';
import type { ApiResponse } from '../api-client.js';
import type { AgentState, AgentWorkloadSpec } from '../generator-protocol.js';
import { ROOT_CHANGE_ID } from '../generator-protocol.js';
import { runPhase } from '../phases.js';
import { counting, noCounters, writeFigures } from '../server-counters.js';
import type { PhaseResult, Verification } from '../report-types.js';
import type { ScenarioContext } from './types.js';
import { requireTarget } from './types.js';

const SETUP_CONCURRENCY = 16;

export interface AgentSetup {
  count: number;
  /** One shared repository (hot-repo) or one per agent (null). */
  sharedRepo: string | null;
  repoPrefix: string;
  /** A file committed on each repository's default bookmark (for readers). */
  seedFile: string | null;
}

export interface CreatedAgents {
  agents: AgentState[];
  /** Repository ids, for webhook targets restricted to them. */
  repoIds: string[];
}

export async function createAgents(ctx: ScenarioContext, setup: AgentSetup): Promise<CreatedAgents> {
  const { target, api } = requireTarget(ctx);
  const repos = setup.sharedRepo
    ? [setup.sharedRepo]
    : Array.from({ length: setup.count }, (_, i) => `${setup.repoPrefix}-${i}`);
  const repoIds = await mapLimit(repos, SETUP_CONCURRENCY, async (name) => {
    const repo = await api.expect<{ id: string; default_bookmark: string }>(201, 'POST', `/v1/${target.org}/repos`, { name });
    if (setup.seedFile) {
      await api.expect(201, 'POST', api.repoPath(name, '/apply-ops'), {
        base_change_id: ROOT_CHANGE_ID,
        message: 'bench seed',
        ops: [{ op: 'write', path: setup.seedFile, content: agentFileContent(0, 0, 0, 4096), encoding: 'utf-8' }],
        bookmarks: [{ name: repo.default_bookmark }],
      });
    }
    return repo.id;
  });
  const agents: AgentState[] = Array.from({ length: setup.count }, (_, index) => ({
    index,
    repo: setup.sharedRepo ?? (repos[index] as string),
    bookmark: `agent-${index}`,
    lastChangeId: ROOT_CHANGE_ID,
    writes: 0,
    chain: [],
  }));
  return { agents, repoIds };
}

export interface WritePhasesOptions {
  label: string;
  agents: AgentState[];
  readRatio: number;
  readPaths: string[];
  /** Fixed open-loop rates (`--open-rates`), one phase each, instead of the one at `openFraction`. */
  openRates?: number[];
}

export interface WritePhasesOutcome {
  phases: PhaseResult[];
  agents: AgentState[];
}

/** The generator's workload for `agents`, each continuing its chain. */
export async function agentWorkload(ctx: ScenarioContext, agents: AgentState[], reads: Pick<WritePhasesOptions, 'readRatio' | 'readPaths'>): Promise<AgentWorkloadSpec> {
  const { target } = requireTarget(ctx);
  const s = ctx.settings;
  return {
    kind: 'agents',
    org: target.org,
    token: await ctx.token(),
    agents,
    files: s.writeFiles,
    fileBytes: s.writeFileBytes,
    readRatio: reads.readRatio,
    readPaths: reads.readPaths,
  };
}

/**
 * Closed loop (maximum throughput), then open loop at `openFraction` of it — or at each of
 * `openRates` — continuing each agent's chain from where the phase before left it.
 */
export async function runWritePhases(ctx: ScenarioContext, opts: WritePhasesOptions): Promise<WritePhasesOutcome> {
  const { target } = requireTarget(ctx);
  const s = ctx.settings;
  const workload = (agents: AgentState[]): Promise<AgentWorkloadSpec> => agentWorkload(ctx, agents, opts);
  const endpoint = { host: target.host, port: target.port };
  /** The phase, with what the server counted while it ran. */
  const counted = async (run: () => ReturnType<typeof runPhase>): ReturnType<typeof runPhase> => {
    const counters = noCounters();
    const outcome = await counting(target.metricsUrl, counters, run);
    const server = writeFigures(counters);
    return server ? { ...outcome, phase: { ...outcome.phase, server } } : outcome;
  };
  const closedWorkload = await workload(opts.agents);
  const closed = await counted(() => runPhase(ctx, { label: `${opts.label} closed`, ...endpoint, mode: 'closed', workload: closedWorkload }));
  let agents = closed.raw.agents ?? opts.agents;
  const phases = [closed.phase];
  const fixed = opts.openRates ?? [];
  const opens: Array<{ rate: number; label: string | null }> =
    fixed.length > 0
      ? fixed.map((rate) => ({ rate, label: `${rate}/s` }))
      : closed.phase.throughput > 0
        ? [{ rate: closed.phase.throughput * s.openFraction, label: null }]
        : [];
  for (const { rate, label } of opens) {
    const openWorkload = await workload(agents);
    const open = await counted(() => runPhase(ctx, { label: `${opts.label} open${label ? ` ${label}` : ''}`, ...endpoint, mode: 'open', rate, workload: openWorkload }));
    agents = open.raw.agents ?? agents;
    phases.push(label ? { ...open.phase, label } : open.phase);
  }
  return { phases, agents };
}

/**
 * The server's figures of each phase for the summary line: `closedKbPerWrite`,
 * `open1000KbPerWrite` (a fixed rate) or `openKbPerWrite` (the fraction), and the same for pages
 * and writes per batch.
 */
export function serverWriteMetrics(phases: PhaseResult[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of phases) {
    if (!p.server) continue;
    const name = p.phase === 'closed' ? 'closed' : `open${p.label?.replace('/s', '') ?? ''}`;
    out[`${name}KbPerWrite`] = p.server.kbPerWrite;
    out[`${name}PagesPerWrite`] = p.server.pagesPerWrite;
    out[`${name}WritesPerBatch`] = p.server.writesPerBatch;
  }
  return out;
}

const HISTORY_PAGE = 200;

interface ChangesPage {
  changes?: Array<{ id: string }>;
  next_cursor?: string | null;
  has_more?: boolean;
}

/**
 * The bookmark's history (children first, without the virtual root) must be exactly the agent's
 * acknowledged chain reversed: nothing lost, nothing extra, parents in order. Returns null when
 * it is, a failure message when not, and 'unavailable' when the server has no `GET …/changes` yet
 * (404/405) — the other checks still stand then.
 */
async function checkHistory(ctx: ScenarioContext, agent: AgentState): Promise<string | null> {
  const { api } = requireTarget(ctx);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `?bookmark=${encodeURIComponent(agent.bookmark)}&limit=${HISTORY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page: ApiResponse<ChangesPage> = await api.call<ChangesPage>('GET', api.repoPath(agent.repo, `/changes${query}`));
    // A missing route (not a missing bookmark) means the server cannot list history yet.
    const routeMissing = (page.status === 404 || page.status === 405) && !page.text.includes('BRANCH_NOT_FOUND');
    if (routeMissing && seen.length === 0) return 'unavailable';
    if (page.status !== 200 || typeof page.body !== 'object' || !Array.isArray(page.body.changes)) {
      return `GET changes?bookmark=${agent.bookmark} → ${page.status} ${page.text.slice(0, 120)}`;
    }
    for (const c of page.body.changes) seen.push(c.id);
    cursor = page.body.has_more ? (page.body.next_cursor ?? null) : null;
  } while (cursor && seen.length <= agent.chain.length);
  const expected = [...agent.chain].reverse();
  if (seen.length !== expected.length) {
    return `history of ${agent.bookmark} has ${seen.length} changes, ${expected.length} were acknowledged`;
  }
  const at = expected.findIndex((id, i) => seen[i] !== id);
  return at < 0 ? null : `history of ${agent.bookmark} differs at position ${at}: ${seen[at]} instead of ${expected[at]}`;
}

/**
 * No acknowledged write lost: every bookmark at its agent's last acknowledged change, that change
 * serving the bytes last written, and the bookmark's history equal to the acknowledged chain.
 */
export async function verifyAgents(ctx: ScenarioContext, agents: AgentState[]): Promise<Verification> {
  const { api } = requireTarget(ctx);
  const s = ctx.settings;
  const failures: string[] = [];
  let historyUnavailable = false;
  await mapLimit(agents, SETUP_CONCURRENCY, async (agent) => {
    if (agent.writes === 0) {
      failures.push(`agent ${agent.index}: no acknowledged write in the whole run`);
      return;
    }
    const bm = await api.call<{ change_id?: string }>('GET', api.repoPath(agent.repo, `/bookmarks/${encodeURIComponent(agent.bookmark)}`));
    const at = typeof bm.body === 'object' && bm.body ? bm.body.change_id : undefined;
    if (bm.status !== 200 || at !== agent.lastChangeId) {
      failures.push(
        `agent ${agent.index}: bookmark ${agent.repo}/${agent.bookmark} → ${bm.status} ${at ?? bm.text.slice(0, 120)}, ` +
          `expected last acknowledged change ${agent.lastChangeId} (${agent.writes} writes)`,
      );
      return;
    }
    const path = agentFilePath(agent.index, 0);
    const file = await api.call(
      'GET',
      api.repoPath(agent.repo, `/content?path=${encodeURIComponent(path)}&change_id=${agent.lastChangeId}`),
      undefined,
      'application/octet-stream',
    );
    const expected = agentFileContent(agent.index, agent.writes, 0, s.writeFileBytes);
    if (file.status !== 200 || file.text !== expected) {
      failures.push(`agent ${agent.index}: ${path} at ${agent.lastChangeId} → ${file.status}, not the bytes of write ${agent.writes}`);
      return;
    }
    const history = await checkHistory(ctx, agent);
    if (history === 'unavailable') historyUnavailable = true;
    else if (history) failures.push(`agent ${agent.index}: ${history}`);
  });
  return {
    ok: failures.length === 0,
    method:
      'per agent: GET …/bookmarks/{name} is the last acknowledged change; GET …/content of file 0 there is the last written bytes; ' +
      (historyUnavailable
        ? 'history walk skipped (GET …/changes not available)'
        : 'GET …/changes?bookmark= lists exactly the acknowledged chain, newest first'),
    checked: agents.length,
    failures: failures.length > 50 ? [...failures.slice(0, 50), `… and ${failures.length - 50} more`] : failures,
  };
}

/** `openRates`: the fixed rates the scenario's open loops ran at, if any (else `openFraction`). */
export function writeParameters(ctx: ScenarioContext, agents: number, openRates: number[] = []): Record<string, number | string> {
  const s = ctx.settings;
  return {
    durationSec: s.durationMs / 1000,
    warmupSec: s.warmupMs / 1000,
    agents,
    filesPerWrite: s.writeFiles,
    fileBytes: s.writeFileBytes,
    ...(openRates.length > 0 ? { openRates: openRates.join(',') } : { openFraction: s.openFraction }),
  };
}

export function totalWrites(agents: AgentState[]): number {
  return agents.reduce((sum, a) => sum + a.writes, 0);
}
