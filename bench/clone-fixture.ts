/**
 * The repository the git scenarios clone (git-clone, clone-isolation): the sync fixture (2,000
 * commits, about 6,000 files) built as a bare repository, served by `git http-backend`, and
 * pulled into repohost so both servers hold the same oids.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createLargeRepo, startGitServer, type GitServer, type LargeRepo } from './git-server.js';
import type { ScenarioContext } from './scenarios/types.js';
import { requireTarget } from './scenarios/types.js';
import { waitForSync } from './upstream-sync.js';

export interface CloneFixture {
  upstream: LargeRepo;
  /** The bare repositories git http-backend serves. */
  gitRoot: string;
  git: GitServer;
  /** The repository's name in repohost. */
  repo: string;
  /** Pulls the upstream into repohost (after the upstream moved). */
  pull: () => Promise<void>;
}

export async function prepareCloneFixture(ctx: ScenarioContext, label: string, work: string): Promise<CloneFixture> {
  const { target, api } = requireTarget(ctx);
  const s = ctx.settings;
  const gitRoot = join(work, 'served');
  await mkdir(gitRoot, { recursive: true });
  ctx.progress.log(`${label}: building the fixture (${s.syncCommits} commits)`);
  const upstream = await createLargeRepo(gitRoot, 'fixture.git', { commits: s.syncCommits, filesPerCommit: s.syncFilesPerCommit });
  const git = await startGitServer({ root: gitRoot });
  try {
    const repo = `${ctx.prefix}-${label}`;
    await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo, upstream: { url: `${git.url}/${upstream.name}` } });
    const pull = async (): Promise<void> => {
      const created = await api.call<{ id: string }>('POST', api.repoPath(repo, '/upstream/syncs'), { direction: 'pull' });
      if (created.status !== 201) throw new Error(`POST upstream/syncs → ${created.status} ${created.text.slice(0, 200)}`);
      const outcome = await waitForSync(api, repo, created.body.id, s.syncTimeoutMs);
      if (outcome.status !== 'completed') throw new Error(`pull ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
    };
    ctx.progress.log(`${label}: pulling the fixture into repohost`);
    await pull();
    return { upstream, gitRoot, git, repo, pull };
  } catch (err) {
    await git.close();
    throw err;
  }
}
