/**
 * Shared set-up of the git-over-HTTP tests: the real `git` command line against a real server,
 * in a scratch directory, never prompting (a missing credential fails instead of waiting), and
 * repository history built through the API.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  bookmark?: string;
  /** Binary contents as Buffers; strings are written as UTF-8. */
  files?: Record<string, string | Buffer>;
  deletes?: string[];
}

/** A new change on `base` via apply-ops; returns its change id, commit oid and commit time (unix seconds). */
export async function write(s: TestServer, repo: string, base: string, opts: WriteOptions): Promise<{ id: string; commit: string; time: number }> {
  const ops: Array<Record<string, unknown>> = Object.entries(opts.files ?? {}).map(([path, content]) =>
    typeof content === 'string' ? { op: 'write', path, content } : { op: 'write', path, content: content.toString('base64'), encoding: 'base64' },
  );
  for (const path of opts.deletes ?? []) ops.push({ op: 'delete', path });
  const body: Record<string, unknown> = { base_change_id: base, message: opts.message ?? 'write', ops };
  if (opts.bookmark) body.bookmarks = [{ name: opts.bookmark, allow_backwards: true, create: true }];
  const res = await s.api('POST', `/${s.org}/${repo}/apply-ops`, { body });
  if (res.status !== 201) throw new Error(`apply-ops on ${base}: ${res.status} ${res.text}`);
  const change = res.json.change as { id: string; current_commit_oid: string; committer: { date: string } };
  return { id: change.id, commit: change.current_commit_oid, time: Math.floor(Date.parse(change.committer.date) / 1000) };
}

/** Resolves once the clock has moved into a later second than `after` (git's commit times are whole seconds). */
export async function nextSecond(after: number): Promise<void> {
  while (Math.floor(Date.now() / 1000) <= after) await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
}

/** One pkt-line of text (a newline is added), or the special packets `0000`/`0001`. */
export function pkt(line: string): string {
  if (line === '0000' || line === '0001') return line;
  const payload = Buffer.from(`${line}\n`, 'utf8');
  return `${(payload.length + 4).toString(16).padStart(4, '0')}${line}\n`;
}

/** A v2 command request: `command=<name>`, a delimiter, the arguments, a flush. */
export function v2Request(command: string, args: string[]): string {
  return [pkt(`command=${command}`), pkt('object-format=sha1'), '0001', ...args.map(pkt), '0000'].join('');
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** POST …/git-upload-pack with a hand-made body (API §14), as git would send it. */
export async function postUploadPack(s: TestServer, repo: string, token: string, body: string | Buffer, opts: { version?: 0 | 2; headers?: Record<string, string> } = {}): Promise<RawResponse> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/x-git-upload-pack-request',
    ...(opts.version === 0 ? {} : { 'git-protocol': 'version=2' }),
    ...opts.headers,
  };
  const res = await fetch(`${s.url}/${s.org}/${repo}.git/git-upload-pack`, { method: 'POST', headers, body });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

export type ResponsePacket = { kind: 'flush' } | { kind: 'delim' } | { kind: 'data'; data: Buffer };

/** Splits a response into pkt-lines; throws when it is not framed as pkt-lines. */
export function responsePackets(body: Buffer): ResponsePacket[] {
  const out: ResponsePacket[] = [];
  let pos = 0;
  while (pos < body.length) {
    const length = parseInt(body.toString('latin1', pos, pos + 4), 16);
    if (!/^[0-9a-f]{4}$/.test(body.toString('latin1', pos, pos + 4))) throw new Error(`not a pkt-line at ${pos}: ${body.toString('latin1', pos, pos + 20)}`);
    if (length === 0) out.push({ kind: 'flush' });
    else if (length === 1) out.push({ kind: 'delim' });
    else out.push({ kind: 'data', data: body.subarray(pos + 4, pos + length) });
    pos += length < 4 ? 4 : length;
  }
  return out;
}

/** The text lines of a response (pkt-lines before any pack data), without their newlines. */
export function responseLines(body: Buffer): string[] {
  const lines: string[] = [];
  for (const p of responsePackets(body)) {
    if (p.kind !== 'data') lines.push(p.kind === 'flush' ? '0000' : '0001');
    else if (p.data[0] === 1 || p.data[0] === 2 || p.data[0] === 3) lines.push(`<band ${p.data[0]}>`);
    else lines.push(p.data.toString('utf8').replace(/\n$/, ''));
  }
  return lines;
}

/** The pack of a side-band response: band 1 joined. */
export function sideBandPack(body: Buffer): Buffer {
  return Buffer.concat(
    responsePackets(body)
      .filter((p): p is { kind: 'data'; data: Buffer } => p.kind === 'data' && p.data[0] === 1)
      .map((p) => p.data.subarray(1)),
  );
}

/** Every object of a pack as git's own `index-pack` and `verify-pack` read it: oid → type. */
export async function packObjects(git: GitClient, pack: Buffer): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(git.dir, 'pack-'));
  const file = join(dir, 'received.pack');
  writeFileSync(file, pack);
  await git.ok(['index-pack', file], { cwd: dir });
  const listing = await git.ok(['verify-pack', '-v', file.replace(/\.pack$/, '.idx')], { cwd: dir });
  const objects = new Map<string, string>();
  for (const line of listing.split('\n')) {
    const m = /^([0-9a-f]{40}) (commit|tree|blob|tag) /.exec(line);
    if (m) objects.set(m[1]!, m[2]!);
  }
  return objects;
}

export interface CommitSpec {
  tree: string;
  parents?: string[];
  /** A `change-id` header (jj's), written after `committer`. */
  changeId?: string;
  /** Further headers after `committer` (and the change id), e.g. `gpgsig` with its continuation lines. */
  headers?: string[];
  message?: string;
  /** Unix seconds of author and committer. */
  time?: number;
}

/** Writes a commit object byte for byte (`git hash-object -t commit -w`) in the repository at `cwd`; returns its oid. */
export function hashCommit(git: GitClient, cwd: string, spec: CommitSpec): Promise<string> {
  const time = spec.time ?? 1_700_000_000;
  const lines = [`tree ${spec.tree}`, ...(spec.parents ?? []).map((p) => `parent ${p}`), `author Git Client <client@example.com> ${time} +0000`, `committer Git Client <client@example.com> ${time} +0000`];
  if (spec.changeId) lines.push(`change-id ${spec.changeId}`);
  lines.push(...(spec.headers ?? []));
  return git.ok(['hash-object', '-t', 'commit', '-w', '--stdin'], { cwd, input: `${lines.join('\n')}\n\n${spec.message ?? 'a commit'}\n` });
}

/** The `push` events an event log received for a repository, oldest first. */
export function pushEvents(events: Array<{ type: string; data: Record<string, unknown> }>): Array<{ updates: any[]; reconciliation: Record<string, number> }> {
  return events.filter((e) => e.type === 'push').map((e) => e.data as { updates: any[]; reconciliation: Record<string, number> });
}

/** POST …/git-receive-pack with a hand-made body, as git would send it. */
export async function postReceivePack(s: TestServer, repo: string, token: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  const res = await fetch(`${s.url}/${s.org}/${repo}.git/git-receive-pack`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-git-receive-pack-request', ...headers },
    body,
  });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}
