/**
 * `scale:repos`: reads as one data directory holds more repositories. On a server of its own, the
 * org grows step by step to each count (`POST …/repos`, 64 at a time), and the data directory is
 * copied at each count. Then, in rounds, each count's server is started (start-up: spawn →
 * "listening", → the first read answered, → its CPU under 10 % of a core), its CPU with no
 * request arriving measured over 3 s, and then timed:
 * - GET /v1/{org}/{repo} in a closed loop over a hot set of 64 repositories and over a spread of
 *   up to 32,768 (more than the front end's record cache holds, so most reads go to LMDB);
 * - the org's cursor listing (`GET …/repos?limit=100`): the first pages walked one after another,
 *   time per page;
 * - GET /v1/{org} (it counts the org's repositories).
 */
import { mapLimit } from '../api-client.js';
import type { StaticRequestSpec } from '../generator-protocol.js';
import { round, runPhase } from '../phases.js';
import type { PhaseResult } from '../report-types.js';
import { CurveBuilder, median, sizeName } from '../scale-curves.js';
import { cpuShare, waitForQuiet } from '../process-io.js';
import { OwnServer } from '../scale-server.js';
import type { ScaleOutcome } from './scale.js';
import type { ScenarioContext, ScenarioSettings } from './types.js';
import { requireTarget } from './types.js';

const CREATE_CONCURRENCY = 64;
const HOT_SET = 64;
const SPREAD = 32_768;
const PAGE = 100;
const PAGES = 20;
const ORG_READS = 5;
const TOKEN_EVERY = 10_000;
const QUIET_SHARE = 0.1;
/** How long a start may stay busy, in phases' worth of time (30 s by default, 5 s in --smoke). */
const QUIET_TIMEOUT_PHASES = 10;
const IDLE_WINDOW_MS = 3_000;

export function reposParameters(s: ScenarioSettings): Record<string, string | number> {
  return {
    repos: s.scaleRepos.join(','),
    connections: s.connections,
    hotSet: HOT_SET,
    spreadUpTo: SPREAD,
    pageSize: PAGE,
    pagesTimed: PAGES,
    durationSec: s.scaleDurationMs / 1000,
    warmupSec: s.scaleWarmupMs / 1000,
  };
}

/** `count` names spread evenly over `names` (creation order). */
function spread(names: readonly string[], count: number): string[] {
  const n = Math.min(count, names.length);
  return Array.from({ length: n }, (_, k) => names[Math.floor((k * names.length) / n)]!);
}

async function grow(ctx: ScenarioContext, own: OwnServer, names: string[], to: number): Promise<number> {
  const from = names.length;
  const org = own.context().target!.org;
  const started = performance.now();
  let next = from;
  await mapLimit(Array.from({ length: CREATE_CONCURRENCY }), CREATE_CONCURRENCY, async () => {
    while (next < to) {
      const i = next++;
      if (i % TOKEN_EVERY === 0) {
        await own.renewToken();
        if (i > from) ctx.progress.log(`scale repos: ${i.toLocaleString('en-US')} of ${to.toLocaleString('en-US')} repositories`);
      }
      // No name: the server makes one up, as a client that does not care would let it.
      const repo = await own.api.expect<{ name: string }>(201, 'POST', `/v1/${org}/repos`, {});
      names.push(repo.name);
    }
  });
  return (to - from) / ((performance.now() - started) / 1000);
}

/** Walks the first pages of the org's cursor listing; ms per page and whether each was full. */
async function walkListing(ctx: ScenarioContext, expected: number): Promise<{ pageMs: number[]; problems: string[] }> {
  const { target, api } = requireTarget(ctx);
  const pageMs: number[] = [];
  const problems: string[] = [];
  let cursor: string | null = null;
  for (let p = 0; p < PAGES; p++) {
    const started = performance.now();
    const res: { status: number; body: { repos?: unknown[]; next_cursor?: string | null } } = await api.call('GET', `/v1/${target.org}/repos?limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    pageMs.push(performance.now() - started);
    const got = res.body.repos?.length ?? -1;
    const want = Math.min(PAGE, expected - p * PAGE);
    if (res.status !== 200 || got !== want) problems.push(`listing page ${p + 1}: ${res.status}, ${got} repositories instead of ${want}`);
    cursor = res.body.next_cursor ?? null;
    if (!cursor) break;
  }
  return { pageMs, problems };
}

interface Snapshot {
  count: number;
  server: OwnServer;
  /** Every repository name at this count, in creation order. */
  names: string[];
}

interface RoundFigures {
  startup: number;
  firstRead: number;
  /** Seconds from spawn until the server's CPU fell under QUIET_SHARE; null when it never did. */
  quiet: number | null;
  idleCpu: number;
  hot: PhaseResult;
  spread: PhaseResult;
  pageMs: number[];
  orgMs: number;
}

/** One round at one count: start the count's server, time everything, stop it. */
async function measureRound(snap: Snapshot, r: number, problems: string[]): Promise<{ figures: RoundFigures; phases: PhaseResult[]; checked: number }> {
  const size = sizeName(snap.count);
  const startup = await snap.server.start();
  const ctx = snap.server.context();
  const s = ctx.settings;
  const { target, api } = requireTarget(ctx);
  const firstStarted = performance.now();
  const first = await api.call('GET', api.repoPath(snap.names[0]!));
  const firstRead = startup + (performance.now() - firstStarted) / 1000;
  if (first.status !== 200) problems.push(`first read after the start at ${size}: ${first.status}`);
  // Reads are timed once the start-up work is done (or known not to end), and the server's own
  // CPU with no request arriving says what it keeps doing in the background.
  const quietAfter = await waitForQuiet(snap.server.pid, QUIET_SHARE, QUIET_TIMEOUT_PHASES * s.scaleDurationMs);
  const quiet = quietAfter === null ? null : firstRead + quietAfter;
  const idleCpu = await cpuShare(snap.server.pid, IDLE_WINDOW_MS);

  const token = await ctx.token();
  const name = `scale repos ${size}${s.scaleRounds > 1 ? ` round ${r + 1}` : ''}`;
  const read = (set: string[], kind: string): Promise<PhaseResult> =>
    runPhase(ctx, {
      label: `${name} read ${kind}`,
      host: target.host,
      port: target.port,
      mode: 'closed',
      durationMs: s.scaleDurationMs,
      warmupMs: s.scaleWarmupMs,
      workload: {
        kind: 'static',
        slots: s.connections,
        requests: set.map((repo): StaticRequestSpec => ({ method: 'GET', path: api.repoPath(repo), headers: { Authorization: `Bearer ${token}` }, kind })),
        expectStatus: 200,
      },
    }).then((o) => ({ ...o.phase, label: `${name} read ${kind}` }));
  const hot = await read(spread(snap.names, HOT_SET), 'hot');
  // Up to the hot set's size both sets are every repository: one phase serves both series.
  const wide = snap.count > HOT_SET ? await read(spread(snap.names, SPREAD), 'spread') : hot;

  const listing = await walkListing(ctx, snap.count);
  problems.push(...listing.problems);
  const orgMs: number[] = [];
  for (let i = 0; i < ORG_READS; i++) {
    const started = performance.now();
    const org = await api.call<{ num_repos?: number }>('GET', `/v1/${target.org}`);
    orgMs.push(performance.now() - started);
    if (i === 0 && (org.status !== 200 || org.body.num_repos !== snap.count)) problems.push(`GET /v1/${target.org} at ${size}: ${org.status}, num_repos ${org.body.num_repos}`);
  }
  await snap.server.stop();
  return {
    figures: { startup, firstRead, quiet, idleCpu, hot, spread: wide, pageMs: listing.pageMs, orgMs: median(orgMs) },
    phases: wide === hot ? [hot] : [hot, wide],
    checked: listing.pageMs.length + 1,
  };
}

export async function runScaleRepos(base: ScenarioContext): Promise<ScaleOutcome> {
  const s = base.settings;
  const grower = await OwnServer.create(base, 'scale-repos');
  const snapshots: Snapshot[] = [];
  const phases: PhaseResult[] = [];
  const metrics: Record<string, number> = {};
  const problems: string[] = [];
  let checked = 0;
  try {
    const names: string[] = [];
    for (const [i, count] of s.scaleRepos.entries()) {
      base.progress.log(`scale repos: growing the org to ${count.toLocaleString('en-US')} repositories`);
      metrics[`createPerSec.${sizeName(count)}`] = round(await grow(base, grower, names, count), 1);
      // A copy of the data directory per count, so the rounds can go back to the smaller ones;
      // the largest count is read on the grown directory itself.
      if (i === s.scaleRepos.length - 1) {
        await grower.stop();
        snapshots.push({ count, server: grower, names: [...names] });
      } else {
        snapshots.push({ count, server: await grower.snapshot(`scale-repos-${count}`), names: [...names] });
      }
    }
    const rounds: RoundFigures[][] = snapshots.map(() => []);
    for (let r = 0; r < s.scaleRounds; r++) {
      for (const [i, snap] of snapshots.entries()) {
        const got = await measureRound(snap, r, problems);
        rounds[i]!.push(got.figures);
        phases.push(...got.phases);
        checked += got.checked;
      }
    }
    const curves = {
      read: new CurveBuilder('repos-read', 'GET /v1/{org}/{repo} vs repositories in the data directory', 'repositories', 'req/s'),
      list: new CurveBuilder('repos-list', "An org's cursor listing (GET …/repos?limit=100): time per page", 'repositories', 'ms'),
      startup: new CurveBuilder('repos-startup', 'Server start-up (from spawn) vs repositories', 'repositories', 's'),
      org: new CurveBuilder('repos-org', 'GET /v1/{org} (counts the repositories) vs repositories', 'repositories', 'ms'),
      idle: new CurveBuilder('repos-idle-cpu', 'Server CPU with no request arriving, after start-up, vs repositories', 'repositories', 'share of one core'),
    };
    const hotLabel = `hot set (${HOT_SET})`;
    const spreadLabel = `spread (up to ${SPREAD.toLocaleString('en-US')})`;
    for (const [i, snap] of snapshots.entries()) {
      const rs = rounds[i]!;
      curves.read.add(hotLabel, snap.count, median(rs.map((f) => f.hot.throughput)));
      curves.read.add(spreadLabel, snap.count, median(rs.map((f) => f.spread.throughput)));
      curves.list.add('median page', snap.count, median(rs.flatMap((f) => f.pageMs)));
      curves.list.add('slowest page', snap.count, median(rs.map((f) => Math.max(...f.pageMs))));
      curves.startup.add('listening', snap.count, median(rs.map((f) => f.startup)));
      curves.startup.add('first read answered', snap.count, median(rs.map((f) => f.firstRead)));
      curves.org.add('median', snap.count, median(rs.map((f) => f.orgMs)));
      curves.idle.add('idle CPU', snap.count, median(rs.map((f) => f.idleCpu)));
      const quiet = rs.map((f) => f.quiet).filter((q): q is number => q !== null);
      if (quiet.length === rs.length) curves.startup.add(`quiet (CPU < ${QUIET_SHARE * 100} % of a core)`, snap.count, median(quiet));
      else metrics[`roundsNotQuiet.${sizeName(snap.count)}`] = rs.length - quiet.length;
    }
    const sizes = `${sizeName(s.scaleRepos[0]!)} … ${sizeName(s.scaleRepos[s.scaleRepos.length - 1]!)} repositories`;
    return {
      phases,
      curves: [
        curves.read.build({ text: `req/s within 10 % of each other at 1k, 100k and 1M repositories; measured ${sizes}`, kind: 'spread', limit: 1.1, series: [hotLabel, spreadLabel] }),
        curves.list.build({
          text: `stays O(page): median ms per page at the largest count within 2× of the smallest (the bench's reading of O(page)); measured ${sizes}`,
          kind: 'growth',
          limit: 2,
          series: ['median page'],
        }),
        curves.startup.build(),
        curves.idle.build(),
        curves.org.build(),
      ],
      metrics,
      verification: {
        ok: problems.length === 0,
        method: `every listed page full (${PAGE}, or the remainder); GET /v1/{org} counts exactly the repositories created; the first read after each start answers 200`,
        checked,
        failures: problems,
      },
      problems: [],
    };
  } finally {
    for (const snap of snapshots) await snap.server.stop();
    await grower.stop();
  }
}
