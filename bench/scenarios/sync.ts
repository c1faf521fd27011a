/**
 * `sync`: pull a large repository from a local git smart-HTTP server while agents keep writing to
 * other repositories. Reports how long the pull took and what it cost the writers (their
 * throughput and latency during the sync). Skipped with a note when the server answers 404/405
 * on the upstream routes (not implemented yet).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLargeRepo, gitAvailable, startGitServer } from '../git-server.js';
import { waitForSync } from '../upstream-sync.js';
import { round, startPhase } from '../phases.js';
import type { RunningPhase } from '../phases.js';
import type { Verification } from '../report-types.js';
import { agentWorkload, createAgents, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { finishResult, resultBase, skippedResult } from './result.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

const NOT_AVAILABLE = new Set([404, 405]);

export const sync: Scenario = {
  name: 'sync',
  description: 'upstream pull of a large repository while agents keep writing',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const { target, api } = requireTarget(ctx);
    const s = ctx.settings;
    const base = resultBase(this, null, {
      ...writeParameters(ctx, s.agents),
      upstreamCommits: s.syncCommits,
      filesPerCommit: s.syncFilesPerCommit,
      syncTimeoutSec: s.syncTimeoutMs / 1000,
    });
    if (!(await gitAvailable())) return skippedResult(base, 'not available: git is not installed');

    const gitRoot = join(ctx.workDir, 'git');
    await mkdir(gitRoot, { recursive: true });
    const upstream = await createLargeRepo(gitRoot, 'large.git', { commits: s.syncCommits, filesPerCommit: s.syncFilesPerCommit });
    const git = await startGitServer({ root: gitRoot });
    let writers: RunningPhase | null = null;
    try {
      const repo = `${ctx.prefix}-sync`;
      await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
      const patched = await api.call('PATCH', api.repoPath(repo), { upstream: { url: `${git.url}/${upstream.name}` } });
      if (NOT_AVAILABLE.has(patched.status)) {
        return skippedResult(base, `not available: PATCH …/{repo} with upstream answered ${patched.status}`);
      }
      if (patched.status !== 200) throw new Error(`PATCH upstream → ${patched.status} ${patched.text.slice(0, 200)}`);
      // Probe the sync routes before any load starts.
      const listed = await api.call('GET', api.repoPath(repo, '/upstream/syncs'));
      if (NOT_AVAILABLE.has(listed.status)) {
        return skippedResult(base, `not available: GET …/upstream/syncs answered ${listed.status}`);
      }

      const { agents } = await createAgents(ctx, { count: s.agents, sharedRepo: null, repoPrefix: `${ctx.prefix}-syncw`, seedFile: null });
      writers = startPhase(ctx, {
        label: 'sync: writes during pull',
        host: target.host,
        port: target.port,
        mode: 'closed',
        durationMs: s.syncTimeoutMs,
        workload: await agentWorkload(ctx, agents, { readRatio: 0, readPaths: [] }),
      });
      // Let the writers reach steady state (the warm-up) before the pull starts. On a loaded
      // machine forking the generator alone can take seconds: wait for its clock, not ours.
      await writers.started;
      const writersStarted = Date.now();
      await sleep(s.warmupMs + 200);
      const started = Date.now();
      const created = await api.call<{ id?: string }>('POST', api.repoPath(repo, '/upstream/syncs'), { direction: 'pull' });
      if (created.status !== 201 || typeof created.body !== 'object' || !created.body?.id) {
        if (NOT_AVAILABLE.has(created.status)) {
          return skippedResult(base, `not available: POST …/upstream/syncs answered ${created.status}`);
        }
        throw new Error(`POST upstream/syncs → ${created.status} ${created.text.slice(0, 200)}`);
      }
      const syncId = created.body.id;
      const { status, error } = await waitForSync(api, repo, syncId, s.syncTimeoutMs);
      const syncSec = (Date.now() - started) / 1000;
      // A pull can finish in well under a second: keep the writers' window at least --duration
      // long so their figures mean something (syncShareOfWindow says how much of it overlapped).
      const windowSoFar = Date.now() - writersStarted - s.warmupMs;
      if (windowSoFar < s.durationMs) await sleep(s.durationMs - windowSoFar);
      writers.stop();
      const out = await writers.outcome;
      writers = null;

      const failures: string[] = [];
      if (status !== 'completed') failures.push(`sync ${syncId} ended ${status} after ${round(syncSec, 1)} s: ${JSON.stringify(error)}`);
      else {
        const bm = await api.call<{ change_id?: string }>('GET', api.repoPath(repo, `/bookmarks/${upstream.branch}`));
        const changeId = typeof bm.body === 'object' && bm.body ? bm.body.change_id : undefined;
        const change = changeId
          ? await api.call<{ current_commit_oid?: string }>('GET', api.repoPath(repo, `/changes/${changeId}`))
          : null;
        const oid = change && typeof change.body === 'object' && change.body ? change.body.current_commit_oid : undefined;
        if (oid !== upstream.head) {
          failures.push(`bookmark ${upstream.branch} → ${changeId ?? bm.status}, commit ${oid ?? 'none'}; upstream head is ${upstream.head}`);
        }
      }
      const agentCheck = await verifyAgents(ctx, out.raw.agents ?? agents);
      const verification: Verification = {
        ok: failures.length === 0 && agentCheck.ok,
        method: `sync completed and bookmark ${upstream.branch} is at the upstream head commit; ${agentCheck.method}`,
        checked: agentCheck.checked + 1,
        failures: [...failures, ...agentCheck.failures],
      };
      return finishResult(base, [out.phase], verification, {
        syncSec: round(syncSec, 3),
        upstreamCommits: upstream.commits,
        upstreamFiles: upstream.files,
        commitsPerSec: round(upstream.commits / syncSec, 1),
        syncShareOfWindow: round(Math.min(1, syncSec / Math.max(0.001, out.phase.durationSec)), 2),
        acknowledgedWrites: totalWrites(out.raw.agents ?? agents),
      });
    } finally {
      if (writers) {
        // Failed half-way: do not leave the generator writing for the rest of the timeout.
        writers.stop();
        await writers.outcome.catch(() => undefined);
      }
      await git.close();
    }
  },
};
