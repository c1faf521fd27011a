import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startTestServer, type StartOptions, type TestServer } from '../helpers/server.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { WEBHOOK_EVENT_KINDS } from '../../src/protocol/schemas/webhooks.js';

/** Shared set-up of the sync tests: a repohost server, a real git server, upstream fixtures. */

export const GIT_USER = 'alice';
export const GIT_PASSWORD = 'pw-Zq8-secret-7731';
export const GIT_TOKEN = 'tok_9f8e7d6c5b4a-secret';
export const HEADER_CHANGE_ID = 'kkkklllmmmnnnoooppqqrrsssttuuvvw';

export interface SyncEnv {
  s: TestServer;
  git: GitServer;
  /** Receives every event of the org (one webhook target subscribed to all kinds). */
  rx: WebhookReceiver;
  hookPath: string;
  close(): Promise<void>;
}

export async function startSyncEnv(opts: StartOptions = {}): Promise<SyncEnv> {
  const git = await startGitServer({ users: { [GIT_USER]: GIT_PASSWORD, 'x-access-token': GIT_TOKEN } });
  const rx = await startWebhookReceiver();
  const s = await startTestServer({ ...opts, env: { REPOHOST_SYNC_RETRY_BASE_MS: '100', ...opts.env } });
  const hookPath = '/events';
  const target = await s.api('POST', '/acme/webhook-targets', { body: { url: rx.url(hookPath), events: WEBHOOK_EVENT_KINDS } });
  if (target.status !== 201) throw new Error(`webhook target: ${target.status} ${target.text}`);
  rx.setSecret(hookPath, target.json.secret);
  return {
    s,
    git,
    rx,
    hookPath,
    async close() {
      await s.stop();
      s.cleanup();
      await rx.close();
      await git.close();
    },
  };
}

export const passwordAuth = { kind: 'username_password', username: GIT_USER, password: GIT_PASSWORD } as const;
export const tokenAuth = { kind: 'token', token: GIT_TOKEN } as const;

export async function createRepo(s: TestServer, name: string, upstream: { url: string; auth?: unknown } | null, extra: Record<string, unknown> = {}): Promise<any> {
  const res = await s.api('POST', '/acme/repos', { body: { name, upstream, ...extra } });
  if (res.status !== 201) throw new Error(`create repo ${name}: ${res.status} ${res.text}`);
  return res.json;
}

export async function enqueue(s: TestServer, repo: string, body: unknown = { direction: 'pull' }): Promise<any> {
  const res = await s.api('POST', `/acme/${repo}/upstream/syncs`, { body });
  if (res.status !== 201) throw new Error(`enqueue on ${repo}: ${res.status} ${res.text}`);
  return res.json;
}

/** Polls a sync until it reaches one of `statuses` (default: finished). */
export async function waitForSync(s: TestServer, repo: string, id: string, statuses: string[] = ['completed', 'failed'], timeoutMs = 30000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await s.api('GET', `/acme/${repo}/upstream/syncs/${id}`);
    if (res.status === 200 && statuses.includes(res.json.status)) return res.json;
    if (Date.now() > deadline) throw new Error(`sync ${id} did not reach ${statuses.join('|')}: ${res.text}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

export async function pullAndWait(s: TestServer, repo: string, body: unknown = { direction: 'pull' }): Promise<any> {
  const queued = await enqueue(s, repo, body);
  return waitForSync(s, repo, queued.id);
}

export interface Upstream {
  url: string;
  name: string;
  work: string;
  oids: {
    c1: string;
    c2: string;
    c3: string;
    feat: string;
    hotfix: string;
    tagV1: string;
  };
}

const at = (n: number): Record<string, string> => ({
  GIT_AUTHOR_DATE: `${1_700_000_000 + n * 60} +0000`,
  GIT_COMMITTER_DATE: `${1_700_000_000 + n * 60} +0000`,
});

/**
 * An upstream with three branches and two tags, made with the git CLI:
 *   main:          c1 ─ c2 (hand-made, `change-id` header) ─ c3
 *   feat/login:    c2 ─ feat
 *   hotfix/crash:  c1 ─ hotfix
 *   v1.0 (annotated, on c1), v2.0 (lightweight, on c3)
 */
export async function makeUpstream(git: GitServer, name: string): Promise<Upstream> {
  const url = await git.createRepo(name);
  const work = mkdtempSync(join(tmpdir(), 'repohost-work-'));
  const g = (args: string[], n = 0, input?: string): Promise<string> => git.gitIn(work, args, { env: at(n), input });
  await g(['init', '--quiet', '-b', 'main']);
  await g(['config', 'user.name', 'Test Author']);
  await g(['config', 'user.email', 'author@example.com']);
  const write = async (file: string, text: string): Promise<void> => {
    const { writeFileSync, mkdirSync } = await import('node:fs');
    const path = join(work, file);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
  };
  await write('README.md', '# upstream\n');
  await write('src/app.txt', 'one\n');
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', 'first commit'], 1);
  const c1 = await g(['rev-parse', 'HEAD']);

  // c2 written by hand with a change-id header, the way jj writes commits.
  await write('src/app.txt', 'one\ntwo\n');
  await g(['add', '-A']);
  const tree = await g(['write-tree']);
  const ts = 1_700_000_000 + 2 * 60;
  const raw = `tree ${tree}\nparent ${c1}\nauthor Test Author <author@example.com> ${ts} +0000\ncommitter Test Author <author@example.com> ${ts} +0000\nchange-id ${HEADER_CHANGE_ID}\n\nsecond commit with a change id\n`;
  const c2 = await g(['hash-object', '-t', 'commit', '-w', '--stdin'], 2, raw);
  await g(['update-ref', 'refs/heads/main', c2]);
  await g(['reset', '--quiet', '--hard', c2]);

  await write('src/app.txt', 'one\ntwo\nthree\n');
  await g(['commit', '--quiet', '-am', 'third commit'], 3);
  const c3 = await g(['rev-parse', 'HEAD']);

  await g(['checkout', '--quiet', '-b', 'feat/login', c2]);
  await write('src/login.txt', 'login\n');
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', 'login feature'], 4);
  const feat = await g(['rev-parse', 'HEAD']);

  await g(['checkout', '--quiet', '-b', 'hotfix/crash', c1]);
  await write('src/app.txt', 'one (fixed)\n');
  await g(['commit', '--quiet', '-am', 'fix the crash'], 5);
  const hotfix = await g(['rev-parse', 'HEAD']);

  await g(['tag', '-a', 'v1.0', '-m', 'release 1.0', c1], 6);
  await g(['tag', 'v2.0', c3]);
  const tagV1 = await g(['rev-parse', 'refs/tags/v1.0']);
  await g(['checkout', '--quiet', 'main']);
  await g(['push', '--quiet', join(git.root, `${name}.git`), '--all']);
  await g(['push', '--quiet', join(git.root, `${name}.git`), '--tags']);
  return { url, name, work, oids: { c1, c2, c3, feat, hotfix, tagV1 } };
}

/** Commits `file` with `text` on the upstream work tree's `branch` and pushes it (optionally forced). */
export async function upstreamCommit(git: GitServer, up: Upstream, branch: string, file: string, text: string, opts: { base?: string; force?: boolean; n?: number } = {}): Promise<string> {
  const { writeFileSync } = await import('node:fs');
  const g = (args: string[]): Promise<string> => git.gitIn(up.work, args, { env: at(opts.n ?? 10) });
  await g(['checkout', '--quiet', '-B', branch, opts.base ?? branch]);
  writeFileSync(join(up.work, file), text);
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', `update ${file}`]);
  await g(['push', '--quiet', ...(opts.force ? ['--force'] : []), join(git.root, `${up.name}.git`), branch]);
  return g(['rev-parse', 'HEAD']);
}

export function cleanupWork(up: Upstream): void {
  rmSync(up.work, { recursive: true, force: true });
}

/**
 * The events of one repository as a webhook receiver got them (deliveries of one repository to
 * one target arrive in event order), once `until` holds for them.
 */
export async function eventsOf(env: SyncEnv, repoId: string, until: (events: RepoEvent[]) => boolean, timeoutMs = 15000): Promise<RepoEvent[]> {
  const list = (): RepoEvent[] =>
    env.rx
      .unique(env.hookPath)
      .map((d) => d.body as { type: string; repository: { id: string } | null; data: any })
      .filter((e) => e.repository?.id === repoId)
      .map((e) => ({ type: e.type, data: e.data }));
  await env.rx.waitFor(() => until(list()), timeoutMs, `events of ${repoId}`);
  return list();
}

export interface RepoEvent {
  type: string;
  data: any;
}

/** apply-ops on a repository; returns the new or evolved change. */
export async function applyOps(s: TestServer, repo: string, body: Record<string, unknown>): Promise<{ id: string; current_commit_oid: string }> {
  const res = await s.api('POST', `/acme/${repo}/apply-ops`, { body });
  if (res.status !== 201 && res.status !== 200) throw new Error(`apply-ops on ${repo}: ${res.status} ${res.text}`);
  return res.json.change;
}
