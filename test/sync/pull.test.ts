import t from 'tap';
import { syntheticChangeId } from '../../src/vcs/ids.js';
import {
  HEADER_CHANGE_ID,
  applyOps,
  cleanupWork,
  createRepo,
  enqueue,
  eventsOf,
  makeUpstream,
  passwordAuth,
  pullAndWait,
  startSyncEnv,
  tokenAuth,
  upstreamCommit,
  waitForSync,
  type SyncEnv,
  type Upstream,
} from './fixtures.js';

let env: SyncEnv;
let up: Upstream;

t.before(async () => {
  env = await startSyncEnv();
  up = await makeUpstream(env.git, 'upstream');
});
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});

const refsOf = (sync: any): Record<string, { before: string | null; after: string | null; outcome: string }> =>
  Object.fromEntries(sync.stats.refs.map((r: any) => [r.name, { before: r.before, after: r.after, outcome: r.outcome }]));

async function bookmarkCommit(repo: string, name: string): Promise<{ change_id: string; commit: string }> {
  const b = await env.s.api('GET', `/acme/${repo}/bookmarks/${encodeURIComponent(name)}`);
  if (b.status !== 200) throw new Error(`bookmark ${name}: ${b.status} ${b.text}`);
  const c = await env.s.api('GET', `/acme/${repo}/changes/${b.json.change_id}`);
  if (c.status !== 200) throw new Error(`change ${b.json.change_id}: ${c.status} ${c.text}`);
  return { change_id: b.json.change_id, commit: c.json.current_commit_oid };
}

t.test('pull - every branch and tag is imported; change ids follow the headers, else jj synthetic ids', async (t) => {
  await createRepo(env.s, 'all', { url: up.url, auth: passwordAuth });
  const queued = await enqueue(env.s, 'all');
  t.equal(queued.status, 'queued');
  t.equal(queued.attempt, 0);
  t.same(queued.ref_globs, { branches: '*', tags: '*' });
  t.equal(queued.stats, null);
  t.equal(queued.started_at, null);
  const sync = await waitForSync(env.s, 'all', queued.id);
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.equal(sync.attempt, 1);
  t.equal(sync.error, null);
  t.ok(sync.started_at && sync.finished_at && sync.finished_at >= sync.started_at);
  t.same(refsOf(sync), {
    'refs/heads/feat/login': { before: null, after: up.oids.feat, outcome: 'updated' },
    'refs/heads/hotfix/crash': { before: null, after: up.oids.hotfix, outcome: 'updated' },
    'refs/heads/main': { before: null, after: up.oids.c3, outcome: 'updated' },
    'refs/tags/v1.0': { before: null, after: up.oids.tagV1, outcome: 'updated' },
    'refs/tags/v2.0': { before: null, after: up.oids.c3, outcome: 'updated' },
  });

  // Every upstream commit is a change whose commit oid is the upstream's: same history.
  const all = (await env.git.git('upstream', ['rev-list', '--all'])).split('\n');
  t.equal(all.length, 5);
  for (const oid of all) {
    const expected = oid === up.oids.c2 ? HEADER_CHANGE_ID : syntheticChangeId(oid);
    const change = await env.s.api('GET', `/acme/all/changes/${expected}`);
    t.equal(change.status, 200, `change of ${oid}`);
    t.equal(change.json.current_commit_oid, oid);
  }
  for (const [branch, tip] of [['main', up.oids.c3], ['feat/login', up.oids.feat], ['hotfix/crash', up.oids.hotfix]] as const) {
    const b = await bookmarkCommit('all', branch);
    t.equal(b.commit, tip, `bookmark ${branch}`);
    // The bookmark's history is the branch's history, commit for commit.
    const log = (await env.git.git('upstream', ['rev-list', tip])).split('\n');
    const changes = await env.s.api('GET', `/acme/all/changes?bookmark=${encodeURIComponent(branch)}&limit=200`);
    t.same(changes.json.changes.map((c: any) => c.current_commit_oid).sort(), [...log].sort(), `history of ${branch}`);
  }
  const c2 = await env.s.api('GET', `/acme/all/changes/${HEADER_CHANGE_ID}`);
  t.same(c2.json.parents, [syntheticChangeId(up.oids.c1)]);

  const repo = await env.s.api('GET', '/acme/all');
  t.equal(repo.json.default_bookmark, 'main');
  t.equal(repo.json.head_change_id, syntheticChangeId(up.oids.c3));
  t.equal(repo.json.upstream.latest_sync.id, sync.id);
  t.equal(repo.json.upstream.latest_sync.status, 'completed');
});

t.test('pull - ref_globs select branches and tags; the rest is reported as filtered', async (t) => {
  await createRepo(env.s, 'globs', { url: up.url, auth: tokenAuth });
  const sync = await pullAndWait(env.s, 'globs', { direction: 'pull', ref_globs: { branches: 'feat/*', tags: 'v2*' } });
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.same(sync.ref_globs, { branches: 'feat/*', tags: 'v2*' });
  t.same(refsOf(sync), {
    'refs/heads/feat/login': { before: null, after: up.oids.feat, outcome: 'updated' },
    'refs/heads/hotfix/crash': { before: null, after: null, outcome: 'filtered' },
    'refs/heads/main': { before: null, after: null, outcome: 'filtered' },
    'refs/tags/v1.0': { before: null, after: null, outcome: 'filtered' },
    'refs/tags/v2.0': { before: null, after: up.oids.c3, outcome: 'updated' },
  });
  t.equal((await env.s.api('GET', '/acme/globs/bookmarks/hotfix%2Fcrash')).status, 404);
  // The tag brought its commits along: c3 is a change although main was not pulled.
  t.equal((await env.s.api('GET', `/acme/globs/changes/${syntheticChangeId(up.oids.c3)}`)).status, 200);
  const main = await env.s.api('GET', '/acme/globs/bookmarks/main');
  t.equal(main.json.change_id, 'z'.repeat(32), 'the filtered default branch leaves main at the root');
});

t.test('pull - a branch glob alone still considers every tag', async (t) => {
  await createRepo(env.s, 'branchglob', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'branchglob', { direction: 'pull', ref_globs: { branches: 'feat/*' } });
  t.same(sync.ref_globs, { branches: 'feat/*', tags: '*' });
  const refs = refsOf(sync);
  t.equal(refs['refs/tags/v1.0']!.outcome, 'updated');
  t.equal(refs['refs/tags/v2.0']!.outcome, 'updated');
  t.equal(refs['refs/heads/main']!.outcome, 'filtered');
});

t.test('pull - the first pull names the default bookmark after the upstream default branch', async (t) => {
  await createRepo(env.s, 'renamed', { url: up.url, auth: passwordAuth }, { default_bookmark: 'trunk' });
  const sync = await pullAndWait(env.s, 'renamed');
  t.equal(sync.status, 'completed', sync.error ?? '');
  const repo = await env.s.api('GET', '/acme/renamed');
  t.equal(repo.json.default_bookmark, 'main');
  t.equal(repo.json.head_change_id, syntheticChangeId(up.oids.c3));
  t.equal((await env.s.api('GET', '/acme/renamed/bookmarks/trunk')).status, 404);
});

t.test('pull - upstream moving forward updates; a force-pushed branch is rejected and the bookmark kept', async (t) => {
  const own = await makeUpstream(env.git, 'moving');
  t.teardown(() => cleanupWork(own));
  await createRepo(env.s, 'moving', { url: own.url, auth: passwordAuth });
  t.equal((await pullAndWait(env.s, 'moving')).status, 'completed');

  const c4 = await upstreamCommit(env.git, own, 'main', 'src/app.txt', 'four\n', { n: 20 });
  const forward = await pullAndWait(env.s, 'moving');
  t.equal(forward.status, 'completed', forward.error ?? '');
  t.same(refsOf(forward)['refs/heads/main'], { before: own.oids.c3, after: c4, outcome: 'updated' });
  t.same(refsOf(forward)['refs/heads/feat/login'], { before: own.oids.feat, after: own.oids.feat, outcome: 'unchanged' });
  t.same(refsOf(forward)['refs/tags/v1.0'], { before: own.oids.tagV1, after: own.oids.tagV1, outcome: 'unchanged' });
  t.equal((await bookmarkCommit('moving', 'main')).commit, c4);

  // Rewrite main upstream: a commit on c3 that does not contain c4.
  const rewritten = await upstreamCommit(env.git, own, 'main', 'src/app.txt', 'rewritten\n', { base: own.oids.c3, force: true, n: 21 });
  const diverged = await pullAndWait(env.s, 'moving');
  t.equal(diverged.status, 'completed', diverged.error ?? '');
  t.same(refsOf(diverged)['refs/heads/main'], { before: c4, after: c4, outcome: 'rejected' });
  t.equal((await bookmarkCommit('moving', 'main')).commit, c4, 'bookmark kept');
  t.not(rewritten, c4);
});

t.test('pull - one push event with the updates and reconciliation counts, beside the bookmark events', async (t) => {
  const repo = await createRepo(env.s, 'events', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'events');
  const events = await eventsOf(env, repo.id, (all) => all.some((e) => e.type === 'sync.completed'));
  const afterQueue = events.map((e) => e.type).filter((type) => type !== 'repo.created');
  t.same(afterQueue, ['bookmark.created', 'sync.queued', 'sync.in_progress', 'bookmark.created', 'bookmark.created', 'bookmark.moved', 'push', 'sync.completed']);
  const byType = (type: string): any[] => events.filter((e) => e.type === type).map((e) => e.data);
  t.same(byType('bookmark.created').slice(1).map((d) => [d.bookmark.name, d.bookmark.commit_oid]), [
    ['feat/login', up.oids.feat],
    ['hotfix/crash', up.oids.hotfix],
  ]);
  t.same(byType('bookmark.moved')[0], {
    bookmark: { name: 'main', change_id: syntheticChangeId(up.oids.c3), is_default: true, commit_oid: up.oids.c3 },
    from: { change_id: 'z'.repeat(32), commit_oid: '0'.repeat(40) },
  });
  const push = byType('push')[0];
  t.same(push.updates, [
    { ref: 'refs/heads/feat/login', bookmark: 'feat/login', before: null, after: up.oids.feat, action: 'created' },
    { ref: 'refs/heads/hotfix/crash', bookmark: 'hotfix/crash', before: null, after: up.oids.hotfix, action: 'created' },
    { ref: 'refs/heads/main', bookmark: 'main', before: null, after: up.oids.c3, action: 'updated' },
  ]);
  t.same(push.reconciliation, {
    reconciled_commit_count: 5,
    touched_change_count: 5,
    changes_created_count: 5,
    evolog_inserted_count: 5,
    invalid_change_id_header_count: 0,
    dirty_change_skip_count: 0,
  });
  t.equal(byType('sync.completed')[0].sync.id, sync.id);

  // Nothing new upstream: the sync completes with every ref unchanged and no push event.
  const again = await pullAndWait(env.s, 'events');
  t.ok(again.stats.refs.every((r: any) => r.outcome === 'unchanged'));
  const later = await eventsOf(env, repo.id, (all) => all.filter((e) => e.type === 'sync.completed').length === 2);
  t.equal(later.filter((e) => e.type === 'push').length, 1);
});

t.test('pull - a change-id already taken keeps its change; the newcomer gets its synthetic id; notes are pulled', async (t) => {
  const own = await makeUpstream(env.git, 'dirty');
  t.teardown(() => cleanupWork(own));
  await createRepo(env.s, 'dirty', { url: own.url, auth: passwordAuth });
  const local = await applyOps(env.s, 'dirty', { base_change_id: 'z'.repeat(32), message: 'local work', ops: [{ op: 'write', path: 'l.txt', content: 'l\n' }], bookmarks: [{ name: 'local', create: true }] });

  // Upstream: a commit claiming the local change's id, then one with a malformed change-id.
  const g = (args: string[], input?: string): Promise<string> => env.git.gitIn(own.work, args, { input });
  const tree = await g(['rev-parse', `${own.oids.c3}^{tree}`]);
  const commit = (parent: string, header: string, message: string): Promise<string> =>
    g(['hash-object', '-t', 'commit', '-w', '--stdin'], `tree ${tree}\nparent ${parent}\nauthor U <u@example.com> 1700001000 +0000\ncommitter U <u@example.com> 1700001000 +0000\n${header}\n\n${message}\n`);
  const claiming = await commit(own.oids.c3, `change-id ${local.id}`, 'claims a local change id');
  const malformed = await commit(claiming, 'change-id not-a-change-id', 'malformed header');
  await g(['update-ref', 'refs/heads/other', malformed]);
  await g(['notes', '--ref=agentblame', 'add', '-m', '{"version":2}', own.oids.c3]);
  await g(['push', '--quiet', `${env.git.root}/dirty.git`, 'other', 'refs/notes/agentblame']);
  const notes = await env.git.git('dirty', ['rev-parse', 'refs/notes/agentblame']);

  const repo = await env.s.api('GET', '/acme/dirty');
  const sync = await pullAndWait(env.s, 'dirty', { direction: 'pull', ref_globs: { branches: 'other', tags: 'none' } });
  t.equal(sync.status, 'completed', sync.error ?? '');
  t.same(refsOf(sync)['refs/notes/agentblame'], { before: null, after: notes, outcome: 'updated' });
  t.same(refsOf(sync)['refs/heads/other'], { before: null, after: malformed, outcome: 'updated' });
  t.equal(refsOf(sync)['refs/heads/main']!.outcome, 'filtered');

  const kept = await env.s.api('GET', `/acme/dirty/changes/${local.id}`);
  t.equal(kept.json.current_commit_oid, local.current_commit_oid, 'the local change keeps its commit');
  t.equal((await env.s.api('GET', `/acme/dirty/changes/${syntheticChangeId(claiming)}`)).json.current_commit_oid, claiming);
  t.equal((await env.s.api('GET', `/acme/dirty/changes/${syntheticChangeId(malformed)}`)).json.current_commit_oid, malformed);
  const events = await eventsOf(env, repo.json.id, (all) => all.some((e) => e.type === 'push'));
  t.same(events.find((e) => e.type === 'push')!.data.reconciliation, {
    reconciled_commit_count: 5,
    touched_change_count: 5,
    changes_created_count: 5,
    evolog_inserted_count: 5,
    invalid_change_id_header_count: 1,
    dirty_change_skip_count: 1,
  });
});
