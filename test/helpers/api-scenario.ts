import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestServer } from './server.js';

/**
 * A data directory with a bit of everything (repositories spread over many shards, files,
 * metadata, bookmarks, a merge, an evolved change, a failed sync), written through the API, and
 * the API's answers about it. Tests that move or rewrite a data directory compare the answers
 * before and after.
 */
const ROOT = 'z'.repeat(32);

/** Server settings under which the answers are stable across restarts (no port in URLs). */
export const SCENARIO_ENV = { REPOHOST_PUBLIC_URL: 'http://repohost.test', REPOHOST_SYNC_RETRY_BASE_MS: '1' };

/** An upstream nothing listens on: a sync against it fails after its retries. */
export const DEAD_UPSTREAM = 'http://127.0.0.1:9/none.git';

async function ok(res: Promise<{ status: number; json: any; text: string }>, what: string): Promise<any> {
  const r = await res;
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r.json;
}

async function change(s: TestServer, repo: string, base: string, files: Record<string, string>, bookmark: string): Promise<string> {
  const ops = Object.entries(files).map(([path, content]) => ({ op: 'write', path, content }));
  const body = { base_change_id: base, message: `write ${Object.keys(files).join(' ')}`, ops, bookmarks: [{ name: bookmark, create: true }] };
  return (await ok(s.api('POST', `/${s.org}/${repo}/apply-ops`, { body }), `apply-ops on ${repo}`)).change.id as string;
}

/** Creates the scenario's repository `name` (`r0` has an upstream). */
export async function createScenarioRepo(s: TestServer, name: string): Promise<void> {
  await ok(s.api('POST', `/${s.org}/repos`, { body: { name, upstream: name === 'r0' ? { url: DEAD_UPSTREAM } : null } }), `create ${name}`);
}

/**
 * Writes `count` repositories named `r0`…, created here unless `created`; `r0` has an upstream and
 * one failed sync.
 */
export async function populate(s: TestServer, count: number, created = false): Promise<void> {
  for (let i = 0; i < count; i++) {
    const repo = `r${i}`;
    if (!created) await createScenarioRepo(s, repo);
    const base = await change(s, repo, ROOT, { 'a.txt': `1\n2\n3\n${repo}\n`, 'dir/b.txt': `b of ${repo}\n` }, 'main');
    const main = await change(s, repo, base, { 'a.txt': `1\nmain\n3\n${repo}\n` }, 'main');
    await change(s, repo, base, { 'dir/c.txt': `feature of ${repo}\n` }, 'feat');
    // Evolve `main`'s change: a second commit for the same change id.
    const evolve = { change_id: main, ops: [{ op: 'write', path: 'e.txt', content: 'evolved\n' }, { op: 'set_metadata', path: 'a.txt', metadata: { owner: repo } }] };
    await ok(s.api('POST', `/${s.org}/${repo}/apply-ops`, { body: evolve }), `evolve on ${repo}`);
    await ok(s.api('POST', `/${s.org}/${repo}/bookmarks/merge`, { body: { target: 'main', source: 'feat' } }), `merge on ${repo}`);
  }
  const sync = await ok(s.api('POST', `/${s.org}/r0/upstream/syncs`, { body: { direction: 'pull' } }), 'sync');
  for (const deadline = Date.now() + 30_000; ; ) {
    const got = await ok(s.api('GET', `/${s.org}/r0/upstream/syncs/${sync.id}`), 'sync status');
    if (got.status === 'failed') break;
    if (Date.now() > deadline) throw new Error(`the sync did not fail: ${JSON.stringify(got)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The refs and every commit a `git clone` of the repository gets. */
function cloned(s: TestServer, repo: string, token: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-clone-'));
  try {
    const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: dir, GIT_TERMINAL_PROMPT: '0' };
    const url = `http://x:${token}@127.0.0.1:${s.port}/${s.org}/${repo}.git`;
    const clone = spawnSync('git', ['clone', '--quiet', '--mirror', url, 'c.git'], { cwd: dir, env, encoding: 'utf8' });
    if (clone.status !== 0) return `clone failed: ${clone.stderr}`;
    const git = (...args: string[]): string => spawnSync('git', args, { cwd: join(dir, 'c.git'), env, encoding: 'utf8' }).stdout;
    return `${git('show-ref')}${git('log', '--all', '--format=%H %T %P %s')}${git('fsck', '--strict', '--no-progress', '--no-dangling')}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the API answers about the data (status and body per request, and each repository's clone). */
export async function apiAnswers(s: TestServer): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const get = async (path: string): Promise<any> => {
    // A cluster under load may answer 503 (an owner briefly unreachable) or 429: clients retry those.
    let res = await s.api('GET', path);
    for (let tries = 0; tries < 20 && (res.status === 503 || res.status === 429); tries++) {
      await new Promise((r) => setTimeout(r, 250));
      res = await s.api('GET', path);
    }
    out[`GET ${path}`] = { status: res.status, body: res.json ?? res.text };
    return res.json;
  };
  const org = `/${s.org}`;
  await get(org);
  await get(`${org}/repos/list?page=1&pageSize=100`);
  await get(`${org}/sync-runs`);
  const token = await s.token();
  const repos = (await get(`${org}/repos?limit=100`)).repos as Array<{ name: string }>;
  for (const { name } of repos) {
    const repo = `${org}/${name}`;
    await get(repo);
    await get(`${repo}/bookmarks`);
    await get(`${repo}/upstream/syncs`);
    const listed = await get(`${repo}/changes?bookmark=main&limit=200`);
    if (!Array.isArray(listed?.changes)) {
      const warnings = s.logs.filter((l) => /"level":"(warn|error)"/.test(l)).slice(-10);
      throw new Error(`${repo}/changes: ${JSON.stringify(out[`GET ${repo}/changes?bookmark=main&limit=200`])}\n${warnings.join('\n')}`);
    }
    const changes = listed.changes as Array<{ id: string }>;
    for (const { id } of changes) {
      await get(`${repo}/changes/${id}`);
      await get(`${repo}/changes/${id}/evolution`);
    }
    await get(`${repo}/content?depth=10`);
    for (const path of ['a.txt', 'dir/b.txt', 'dir/c.txt', 'e.txt']) await get(`${repo}/content?path=${encodeURIComponent(path)}`);
    const oldest = changes[changes.length - 1]?.id ?? ROOT;
    await get(`${repo}/diff?base_change_id=${ROOT}&head_change_id=${changes[0]?.id ?? ROOT}`);
    await get(`${repo}/diff?base_change_id=${oldest}&head_change_id=${changes[0]?.id ?? ROOT}`);
    out[`clone ${repo}`] = cloned(s, name, token);
  }
  return out;
}
