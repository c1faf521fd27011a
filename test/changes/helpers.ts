/**
 * Shared fixtures of the change write-path tests: a server with a repository, shorthands for
 * apply-ops and change reads, and `repohost export` + real git to check what was stored.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, startTestServer, type StartOptions, type TestServer } from '../helpers/server.js';

export const ROOT = 'z'.repeat(32);

export interface RepoFixture {
  s: TestServer;
  repo: string;
  /** `/{org}/{repo}` */
  base: string;
}

export async function startWithRepo(t: { teardown(fn: () => unknown): void }, name = 'r1', opts: StartOptions = {}): Promise<RepoFixture> {
  const s = await startTestServer(opts);
  t.teardown(async () => {
    await s.stop();
    s.cleanup();
  });
  const created = await s.api('POST', `/${s.org}/repos`, { body: { name } });
  if (created.status !== 201) throw new Error(`repo create failed: ${created.status} ${created.text}`);
  return { s, repo: name, base: `/${s.org}/${name}` };
}

export type ApiResult = Awaited<ReturnType<TestServer['api']>>;

export function applyOps(f: RepoFixture, body: Record<string, unknown>, token?: string): Promise<ApiResult> {
  return f.s.api('POST', `${f.base}/apply-ops`, { body, token });
}

export function write(path: string, content: string): Record<string, unknown> {
  return { op: 'write', path, content };
}

export interface GitExport {
  dir: string;
  git(...args: string[]): { status: number; stdout: string; stderr: string; raw: Buffer };
  /** `git fsck --strict` output when it reports anything, else null. */
  fsckProblems(): string | null;
  cleanup(): void;
}

/** Runs `repohost export` (a separate process, like an operator would) into a fresh directory. */
export function exportRepo(f: RepoFixture): GitExport {
  const parent = mkdtempSync(join(tmpdir(), 'repohost-export-'));
  const dir = join(parent, 'repo.git');
  const r = spawnSync(process.execPath, [CLI, 'export', `${f.s.org}/${f.repo}`, dir, '--data', f.s.dataDir, '--json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`export failed (${r.status}): ${r.stderr}${r.stdout}`);
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: parent };
  const git = (...args: string[]): { status: number; stdout: string; stderr: string; raw: Buffer } => {
    const out = spawnSync('git', args, { cwd: dir, env, maxBuffer: 1024 * 1024 * 1024 });
    return { status: out.status ?? -1, stdout: out.stdout.toString('utf8'), stderr: out.stderr.toString('utf8'), raw: out.stdout };
  };
  return {
    dir,
    git,
    fsckProblems() {
      const res = git('fsck', '--strict', '--no-progress', '--no-dangling');
      const output = `${res.stdout}${res.stderr}`;
      return res.status === 0 && !/error|warning|missing|broken/i.test(output) ? null : output || `exit ${res.status}`;
    },
    cleanup: () => rmSync(parent, { recursive: true, force: true }),
  };
}
