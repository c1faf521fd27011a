/**
 * Shared set-up of the git-over-HTTP tests: the real `git` command line against a real server,
 * in a scratch directory, never prompting (a missing credential fails instead of waiting), and
 * repository history built through the API.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestServer } from '../helpers/server.js';

export const ROOT = 'z'.repeat(32);

export interface GitResult {
  status: number;
  stdout: string;
  stderr: string;
}

export interface GitClient {
  /** Scratch directory: clones go under it. */
  dir: string;
  /** Runs git in `cwd` (default the scratch directory). */
  run(args: string[], opts?: { cwd?: string; input?: string; env?: Record<string, string> }): Promise<GitResult>;
  /** Like `run`, but throws with git's output unless it exits 0; returns trimmed stdout. */
  ok(args: string[], opts?: { cwd?: string; input?: string; env?: Record<string, string> }): Promise<string>;
  /** `git fsck --strict` of a repository: its complaints, or null when clean. */
  fsckProblems(cwd: string): Promise<string | null>;
}

export function gitClient(t: { teardown(fn: () => unknown): void }): GitClient {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-git-client-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    HOME: dir,
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    SSH_ASKPASS: '',
    GIT_AUTHOR_NAME: 'Git Client',
    GIT_AUTHOR_EMAIL: 'client@example.com',
    GIT_COMMITTER_NAME: 'Git Client',
    GIT_COMMITTER_EMAIL: 'client@example.com',
  };
  const run: GitClient['run'] = (args, opts = {}) =>
    new Promise((resolve, reject) => {
      const child = spawn('git', args, { cwd: opts.cwd ?? dir, env: { ...env, ...opts.env }, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout!.on('data', (d: Buffer) => out.push(d));
      child.stderr!.on('data', (d: Buffer) => err.push(d));
      child.on('error', reject);
      child.on('close', (code) => resolve({ status: code ?? -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
      if (opts.input !== undefined) child.stdin!.end(opts.input);
    });
  const client: GitClient = {
    dir,
    run,
    async ok(args, opts) {
      const res = await run(args, opts);
      if (res.status !== 0) throw new Error(`git ${args.join(' ')} exited ${res.status}: ${res.stderr}`);
      return res.stdout.trim();
    },
    async fsckProblems(cwd) {
      const res = await run(['fsck', '--strict', '--no-progress', '--no-dangling'], { cwd });
      const output = `${res.stdout}${res.stderr}`;
      return res.status === 0 && !/error|warning|missing|broken|bad/i.test(output) ? null : output || `exit ${res.status}`;
    },
  };
  return client;
}

/** The clone URL of a repository with the token as Basic password (`x` as the user). */
export function cloneUrl(s: TestServer, repo: string, token: string | null, suffix = '.git'): string {
  return `http://${token === null ? '' : `x:${token}@`}127.0.0.1:${s.port}/${s.org}/${repo}${suffix}`;
}

/** `git -c protocol.version=<v>` for each protocol the tests cover. */
export const PROTOCOLS = ['2', '0'] as const;
export const protocol = (v: string): string[] => ['-c', `protocol.version=${v}`];

export async function createRepo(s: TestServer, name: string): Promise<void> {
  const res = await s.api('POST', `/${s.org}/repos`, { body: { name } });
  if (res.status !== 201) throw new Error(`create repo ${name}: ${res.status} ${res.text}`);
}

export interface WriteOptions {
  message?: string;
  /** Committer time (the time git's shallow-since compares). */
  date?: Date;
  bookmark?: string;
  /** Binary contents as Buffers; strings are written as UTF-8. */
  files?: Record<string, string | Buffer>;
  deletes?: string[];
}

/** A new change on `base` via apply-ops; returns its change id and commit oid. */
export async function write(s: TestServer, repo: string, base: string, opts: WriteOptions): Promise<{ id: string; commit: string }> {
  const ops: Array<Record<string, unknown>> = Object.entries(opts.files ?? {}).map(([path, content]) =>
    typeof content === 'string' ? { op: 'write', path, content } : { op: 'write', path, content: content.toString('base64'), encoding: 'base64' },
  );
  for (const path of opts.deletes ?? []) ops.push({ op: 'delete', path });
  const body: Record<string, unknown> = { base_change_id: base, message: opts.message ?? 'write', ops };
  if (opts.date) body.committer = { name: 'API Writer', email: 'writer@example.com', date: opts.date.toISOString() };
  if (opts.bookmark) body.bookmarks = [{ name: opts.bookmark, allow_backwards: true, create: true }];
  const res = await s.api('POST', `/${s.org}/${repo}/apply-ops`, { body });
  if (res.status !== 201) throw new Error(`apply-ops on ${base}: ${res.status} ${res.text}`);
  return { id: res.json.change.id as string, commit: res.json.change.current_commit_oid as string };
}
