/**
 * `scale:repos`: reads as one data directory holds more repositories. On a server of its own, the
 * org grows step by step to each count (`POST …/repos`, 64 at a time); at each count the server is
 * restarted (start-up time: spawn → "listening", and → the first read answered), then
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
import { CurveBuilder, sizeName } from '../scale-curves.js';
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

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
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

export async function runScaleRepos(base: ScenarioContext): Promise<ScaleOutcome> {
  const s = base.settings;
  const own = await OwnServer.start(base, 'scale-repos');
  const curves = {
    read: new CurveBuilder('repos-read', 'GET /v1/{org}/{repo} vs repositories in the data directory', 'repositories', 'req/s'),
    list: new CurveBuilder('repos-list', "An org's cursor listing (GET …/repos?limit=100): time per page", 'repositories', 'ms'),
    startup: new CurveBuilder('repos-startup', 'Server start-up (from spawn) vs repositories', 'repositories', 's'),
    org: new CurveBuilder('repos-org', 'GET /v1/{org} (counts the repositories) vs repositories', 'repositories', 'ms'),
  };
  const phases: PhaseResult[] = [];
  const metrics: Record<string, number> = {};
  const problems: string[] = [];
  let checked = 0;
  try {
    const names: string[] = [];
    for (const count of s.scaleRepos) {
      const size = sizeName(count);
      base.progress.log(`scale repos: growing the org to ${count.toLocaleString('en-US')} repositories`);
      metrics[`createPerSec.${size}`] = round(await grow(base, own, names, count), 1);
      const startup = await own.restart();
      const ctx = own.context();
      const { target, api } = requireTarget(ctx);
      const firstStarted = performance.now();
      const first = await api.call('GET', api.repoPath(names[0]!));
      if (first.status !== 200) problems.push(`first read after the restart at ${size}: ${first.status}`);
      curves.startup.add('listening', count, startup);
      curves.startup.add('first read answered', count, startup + (performance.now() - firstStarted) / 1000);

      const token = await ctx.token();
      const read = (set: string[], kind: string): Promise<PhaseResult> =>
        runPhase(ctx, {
          label: `scale repos ${size} read ${kind}`,
          host: target.host,
          port: target.port,
          mode: 'closed',
          durationMs: s.scaleDurationMs,
          warmupMs: s.scaleWarmupMs,
          workload: {
            kind: 'static',
            slots: s.connections,
            requests: set.map((name): StaticRequestSpec => ({ method: 'GET', path: api.repoPath(name), headers: { Authorization: `Bearer ${token}` }, kind })),
            expectStatus: 200,
          },
        }).then((o) => ({ ...o.phase, label: `scale repos ${size} read ${kind}` }));
      const hot = await read(spread(names, HOT_SET), 'hot');
      phases.push(hot);
      // Up to the hot set's size both sets are every repository: one phase serves both series.
      const wide = count > HOT_SET ? await read(spread(names, SPREAD), 'spread') : hot;
      if (wide !== hot) phases.push(wide);
      curves.read.add(`hot set (${HOT_SET})`, count, hot.throughput);
      curves.read.add(`spread (up to ${SPREAD.toLocaleString('en-US')})`, count, wide.throughput);

      const listing = await walkListing(ctx, count);
      problems.push(...listing.problems);
      curves.list.add('median page', count, median(listing.pageMs));
      curves.list.add('slowest page', count, Math.max(...listing.pageMs));

      const orgMs: number[] = [];
      for (let i = 0; i < ORG_READS; i++) {
        const started = performance.now();
        const org = await api.call<{ num_repos?: number }>('GET', `/v1/${target.org}`);
        orgMs.push(performance.now() - started);
        if (i === 0 && (org.status !== 200 || org.body.num_repos !== count)) problems.push(`GET /v1/${target.org} at ${size}: ${org.status}, num_repos ${org.body.num_repos}`);
      }
      curves.org.add('median', count, median(orgMs));
      checked += listing.pageMs.length + 1;
    }
  } finally {
    await own.stop();
  }
  const sizes = `${sizeName(s.scaleRepos[0]!)} … ${sizeName(s.scaleRepos[s.scaleRepos.length - 1]!)} repositories`;
  return {
    phases,
    curves: [
      curves.read.build({
        text: `req/s within 10 % of each other at 1k, 100k and 1M repositories; measured ${sizes}`,
        kind: 'spread',
        limit: 1.1,
        series: [`hot set (${HOT_SET})`, `spread (up to ${SPREAD.toLocaleString('en-US')})`],
      }),
      curves.list.build({
        text: `stays O(page): median ms per page at the largest count within 2× of the smallest (the bench's reading of O(page)); measured ${sizes}`,
        kind: 'growth',
        limit: 2,
        series: ['median page'],
      }),
      curves.startup.build(),
      curves.org.build(),
    ],
    metrics,
    verification: {
      ok: problems.length === 0,
      method: `every listed page full (${PAGE}, or the remainder); GET /v1/{org} counts exactly the repositories created`,
      checked,
      failures: problems,
    },
    problems: [],
  };
}
