import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyOps, createRepo, passwordAuth, startSyncEnv, waitForSync, type SyncEnv } from './fixtures.js';

let env: SyncEnv;
t.before(async () => {
  env = await startSyncEnv();
});
t.teardown(() => env.close());

const ROOT = 'z'.repeat(32);
const refsOf = (sync: any): Record<string, { before: string | null; after: string | null; outcome: string }> =>
  Object.fromEntries(sync.stats.refs.map((r: any) => [r.name, { before: r.before, after: r.after, outcome: r.outcome }]));

async function push(repo: string, body?: unknown): Promise<any> {
  const res = body === undefined ? await env.s.api('POST', `/acme/${repo}/push`) : await env.s.api('POST', `/acme/${repo}/upstream/syncs`, { body });
  if (res.status !== 201) throw new Error(`push ${repo}: ${res.status} ${res.text}`);
  return waitForSync(env.s, repo, res.json.id);
}

const remoteLog = async (name: string, ref: string): Promise<string[]> => (await env.git.git(name, ['log', '--format=%H', ref])).split('\n');

t.test('push - bookmarks written through apply-ops reach the remote as branches, history intact', async (t) => {
  const url = await env.git.createRepo('pushed');
  await createRepo(env.s, 'pusher', { url, auth: passwordAuth });
  const first = await applyOps(env.s, 'pusher', { base_change_id: ROOT, message: 'first', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });
  const second = await applyOps(env.s, 'pusher', { base_change_id: first.id, message: 'second', ops: [{ op: 'write', path: 'b.txt', content: 'b\n' }], bookmarks: [{ name: 'main' }] });
  const feature = await applyOps(env.s, 'pusher', { base_change_id: first.id, message: 'feature', ops: [{ op: 'write', path: 'f.txt', content: 'f\n' }], bookmarks: [{ name: 'feature/x', create: true }] });

  const res = await env.s.api('POST', '/acme/pusher/push');
  t.equal(res.status, 201);
  t.equal(res.json.direction, 'push');
  t.same(res.json.ref_globs, { branches: '*', tags: '*' });
  const sync = await waitForSync(env.s, 'pusher', res.json.id);
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.same(refsOf(sync), {
    'refs/heads/feature/x': { before: null, after: feature.current_commit_oid, outcome: 'updated' },
    'refs/heads/main': { before: null, after: second.current_commit_oid, outcome: 'updated' },
  });
  t.same(await remoteLog('pushed', 'main'), [second.current_commit_oid, first.current_commit_oid]);
  t.same(await remoteLog('pushed', 'feature/x'), [feature.current_commit_oid, first.current_commit_oid]);
  t.equal(await env.git.git('pushed', ['fsck', '--strict', '--no-progress']), '', 'the remote repository is valid');
  // The remote has the change ids: our commits carry the change-id header.
  t.match(await env.git.git('pushed', ['cat-file', 'commit', second.current_commit_oid]), new RegExp(`\nchange-id ${second.id}\n`));

  const again = await push('pusher');
  t.same(refsOf(again)['refs/heads/main'], { before: second.current_commit_oid, after: second.current_commit_oid, outcome: 'unchanged' });
});

t.test('push - a diverged remote branch is rejected while the others update; ref_globs filter', async (t) => {
  const url = await env.git.createRepo('diverge');
  await createRepo(env.s, 'diverger', { url, auth: passwordAuth });
  const base = await applyOps(env.s, 'diverger', { base_change_id: ROOT, message: 'base', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });
  await applyOps(env.s, 'diverger', { base_change_id: base.id, message: 'side', ops: [{ op: 'write', path: 's.txt', content: 's\n' }], bookmarks: [{ name: 'side', create: true }] });
  t.equal((await push('diverger')).status, 'completed');

  // Someone else moves `side` on the remote with a commit we do not have.
  const work = mkdtempSync(join(tmpdir(), 'repohost-clone-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  await env.git.gitIn(work, ['clone', '--quiet', join(env.git.root, 'diverge.git'), '.']);
  await env.git.gitIn(work, ['checkout', '--quiet', 'side']);
  writeFileSync(join(work, 'theirs.txt'), 'theirs\n');
  await env.git.gitIn(work, ['add', '-A']);
  await env.git.gitIn(work, ['-c', 'user.name=Other', '-c', 'user.email=o@example.com', 'commit', '--quiet', '-m', 'theirs']);
  await env.git.gitIn(work, ['push', '--quiet', 'origin', 'side']);
  const theirs = await env.git.git('diverge', ['rev-parse', 'refs/heads/side']);

  const mainTip = await applyOps(env.s, 'diverger', { base_change_id: base.id, message: 'main moves', ops: [{ op: 'write', path: 'm.txt', content: 'm\n' }], bookmarks: [{ name: 'main' }] });
  const sideRes = await env.s.api('GET', '/acme/diverger/bookmarks/side');
  const ours = await applyOps(env.s, 'diverger', { base_change_id: sideRes.json.change_id, message: 'ours', ops: [{ op: 'write', path: 'o.txt', content: 'o\n' }], bookmarks: [{ name: 'side' }] });

  const filtered = await push('diverger', { direction: 'push', ref_globs: { branches: 'side' } });
  t.same(refsOf(filtered)['refs/heads/main']!.outcome, 'filtered');
  t.same(refsOf(filtered)['refs/heads/side'], { before: theirs, after: theirs, outcome: 'rejected' });

  const sync = await push('diverger');
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.same(refsOf(sync)['refs/heads/main']!.outcome, 'updated');
  t.same(refsOf(sync)['refs/heads/side'], { before: theirs, after: theirs, outcome: 'rejected' });
  t.equal(await env.git.git('diverge', ['rev-parse', 'refs/heads/main']), mainTip.current_commit_oid);
  t.equal(await env.git.git('diverge', ['rev-parse', 'refs/heads/side']), theirs, 'their branch kept');
  t.not(ours.current_commit_oid, theirs);
});

t.test('push - a branch the remote refuses is rejected without failing the others', async (t) => {
  const url = await env.git.createRepo('guarded');
  // A per-ref `update` hook: the remote refuses refs/heads/locked only.
  const hook = join(env.git.root, 'guarded.git', 'hooks', 'update');
  writeFileSync(hook, '#!/bin/sh\n[ "$1" = "refs/heads/locked" ] && { echo "locked is protected" >&2; exit 1; }\nexit 0\n');
  chmodSync(hook, 0o755);
  await createRepo(env.s, 'guarded', { url, auth: passwordAuth });
  const c = await applyOps(env.s, 'guarded', { base_change_id: ROOT, message: 'one', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });
  await env.s.api('POST', '/acme/guarded/bookmarks', { body: { name: 'locked', change_id: c.id } });
  const sync = await push('guarded');
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.same(refsOf(sync), {
    'refs/heads/locked': { before: null, after: null, outcome: 'rejected' },
    'refs/heads/main': { before: null, after: c.current_commit_oid, outcome: 'updated' },
  });
  t.equal(await env.git.git('guarded', ['rev-parse', 'refs/heads/main']), c.current_commit_oid);
});

t.test('push - a conflicted change is never pushed', async (t) => {
  const url = await env.git.createRepo('conflicts');
  await createRepo(env.s, 'conflicted', { url, auth: passwordAuth });
  const base = await applyOps(env.s, 'conflicted', { base_change_id: ROOT, message: 'base', ops: [{ op: 'write', path: 'f.txt', content: 'base\n' }], bookmarks: [{ name: 'main' }] });
  await applyOps(env.s, 'conflicted', { base_change_id: base.id, message: 'left', ops: [{ op: 'write', path: 'f.txt', content: 'left\n' }], bookmarks: [{ name: 'left', create: true }] });
  await applyOps(env.s, 'conflicted', { base_change_id: base.id, message: 'right', ops: [{ op: 'write', path: 'f.txt', content: 'right\n' }], bookmarks: [{ name: 'right', create: true }] });
  const merge = await env.s.api('POST', '/acme/conflicted/bookmarks/merge', { body: { target: 'left', source: 'right', allow_conflicted: true } });
  t.equal(merge.status, 200, merge.text);
  t.equal(merge.json.is_conflicted, true);
  const sync = await push('conflicted');
  t.equal(sync.status, 'completed', sync.error ?? '');
  const refs = refsOf(sync);
  t.same(refs['refs/heads/left'], { before: null, after: null, outcome: 'rejected' });
  t.equal(refs['refs/heads/main']!.outcome, 'updated');
  t.equal(refs['refs/heads/right']!.outcome, 'updated');
  await t.rejects(env.git.git('conflicts', ['rev-parse', '--verify', '--quiet', 'refs/heads/left']));
});
