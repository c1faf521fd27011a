import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { ROOT, bookmarkTarget, createRepo, operations, repoId, write } from './history.js';

const s = await serverForFile(t);

const BASE = '1\n2\n3\n';

interface Diverged {
  base: string;
  main: string;
  feat: string;
}

/**
 * `main` and `feat` both branch off one base change. With `conflicting`, both rewrite line 2 of
 * a.txt differently; otherwise each adds its own file.
 */
async function diverged(repo: string, conflicting: boolean): Promise<Diverged> {
  await createRepo(s, repo);
  const base = await write(s, repo, ROOT, { 'a.txt': BASE }, 'base');
  const main = await write(s, repo, base, conflicting ? { 'a.txt': '1\nmain\n3\n' } : { 'm.txt': 'main\n' }, 'on main');
  const feat = await write(s, repo, base, conflicting ? { 'a.txt': '1\nfeat\n3\n' } : { 'f.txt': 'feat\n' }, 'on feat');
  const moved = await s.api('PATCH', `/acme/${repo}/bookmarks/main`, { body: { change_id: main } });
  const created = await s.api('POST', `/acme/${repo}/bookmarks`, { body: { name: 'feat', change_id: feat } });
  if (moved.status !== 200 || created.status !== 201) throw new Error(`setting up ${repo}: ${moved.text} ${created.text}`);
  return { base, main, feat };
}

async function fileAt(repo: string, changeId: string, path: string): Promise<string | null> {
  const res = await s.api('GET', `/acme/${repo}/content?change_id=${changeId}&path=${encodeURIComponent(path)}`);
  if (res.status === 404) return null;
  if (res.status !== 200) throw new Error(`content ${path}: ${res.status} ${res.text}`);
  return Buffer.from(res.json.content as string, 'base64').toString('utf8');
}

async function changesOf(repo: string, bookmark: string): Promise<string[]> {
  const res = await s.api('GET', `/acme/${repo}/changes?bookmark=${encodeURIComponent(bookmark)}&limit=200`);
  return res.json.changes.map((c: { id: string }) => c.id);
}

t.test('merge - a clean merge creates a two-parent merge change and moves the target', async (t) => {
  const h = await diverged('clean', false);
  const res = await s.api('POST', '/acme/clean/bookmarks/merge', { body: { target: 'main', source: 'feat' } });
  t.equal(res.status, 200);
  t.match(res.json, { merge_type: 'merge_commit', is_conflicted: false, target: 'main', source: 'feat', source_deleted: false });
  t.match(res.json.commit_oid, /^[0-9a-f]{40}$/);
  const id = res.json.change_id as string;
  t.not(id, h.main);
  t.equal(await bookmarkTarget(s, 'clean', 'main'), id, 'the target moved to the merge');
  t.equal(await bookmarkTarget(s, 'clean', 'feat'), h.feat, 'the source stays');

  const change = await s.api('GET', `/acme/clean/changes/${id}`);
  t.equal(change.status, 200);
  t.same(change.json.parents, [h.main, h.feat], 'parents: the target, then the source');
  t.equal(change.json.message, "Merge bookmark 'feat' into 'main'");
  t.equal(change.json.current_commit_oid, res.json.commit_oid);
  t.equal(change.json.is_conflicted, false);
  t.same(change.json.files, ['f.txt'], 'relative to the first parent, the merge brings in the source');
  t.equal(await fileAt('clean', id, 'm.txt'), 'main\n');
  t.equal(await fileAt('clean', id, 'f.txt'), 'feat\n');
  t.equal(await fileAt('clean', id, 'a.txt'), BASE);
});

t.test('merge - a merge that could fast-forward is still a merge commit', async (t) => {
  await createRepo(s, 'ff');
  const base = await write(s, 'ff', ROOT, { 'a.txt': BASE });
  const ahead = await write(s, 'ff', base, { 'b.txt': 'b\n' });
  await s.api('POST', '/acme/ff/bookmarks', { body: { name: 'topic', change_id: ahead } });
  const res = await s.api('POST', '/acme/ff/bookmarks/merge', { body: { target: 'main', source: 'topic' } });
  t.equal(res.json.merge_type, 'merge_commit');
  const change = await s.api('GET', `/acme/ff/changes/${res.json.change_id}`);
  t.same(change.json.parents, [base, ahead]);
});

t.test('merge - into a bookmark at the virtual root takes the source content', async (t) => {
  await createRepo(s, 'from-root');
  const first = await write(s, 'from-root', ROOT, { 'a.txt': BASE });
  await s.api('POST', '/acme/from-root/bookmarks', { body: { name: 'empty', change_id: ROOT } });
  const res = await s.api('POST', '/acme/from-root/bookmarks/merge', { body: { target: 'empty', source: 'main' } });
  t.equal(res.status, 200);
  t.equal(res.json.merge_type, 'merge_commit');
  const change = await s.api('GET', `/acme/from-root/changes/${res.json.change_id}`);
  t.same(change.json.parents, [ROOT, first]);
  t.equal(await fileAt('from-root', res.json.change_id, 'a.txt'), BASE);
});

t.test('merge - message "" leaves no description, a given message is kept', async (t) => {
  const h = await diverged('messages', false);
  const empty = await s.api('POST', '/acme/messages/bookmarks/merge', { body: { target: 'main', source: 'feat', message: '' } });
  t.equal(empty.status, 200);
  t.equal((await s.api('GET', `/acme/messages/changes/${empty.json.change_id}`)).json.message, '');

  const side = await write(s, 'messages', h.base, { 's.txt': 's\n' });
  await s.api('POST', '/acme/messages/bookmarks', { body: { name: 'side', change_id: side } });
  const custom = await s.api('POST', '/acme/messages/bookmarks/merge', { body: { target: 'main', source: 'side', message: 'Bring in side\n\nDetails.' } });
  t.equal((await s.api('GET', `/acme/messages/changes/${custom.json.change_id}`)).json.message, 'Bring in side\n\nDetails.');
});

t.test('merge - a conflict is refused with paths and hunks, and nothing is saved', async (t) => {
  const h = await diverged('conflict', true);
  const before = await changesOf('conflict', 'main');
  const id = await repoId(s, 'conflict');
  const opsBefore = operations(s, id).length;
  const res = await s.api('POST', '/acme/conflict/bookmarks/merge', { body: { target: 'main', source: 'feat' } });
  t.equal(res.status, 409);
  t.equal(res.json.error.code, 'MERGE_CONFLICT');
  t.same(res.json.error.details.conflict_paths, ['a.txt']);
  const [conflict] = res.json.error.details.conflicts;
  t.equal(conflict.path, 'a.txt');
  t.equal(conflict.hunks.length, 1);
  const hunk = conflict.hunks[0];
  t.match(hunk.hunk_id, /^[0-9a-f]+$/);
  t.equal(Buffer.from(hunk.base.content, 'base64').toString(), '2\n');
  t.equal(Buffer.from(hunk.target.content, 'base64').toString(), 'main\n');
  t.equal(Buffer.from(hunk.source.content, 'base64').toString(), 'feat\n');

  t.equal(await bookmarkTarget(s, 'conflict', 'main'), h.main, 'the target did not move');
  t.same(await changesOf('conflict', 'main'), before);
  t.equal(operations(s, id).length, opsBefore, 'no operation was recorded: the merge left no trace');
});

t.test('merge - allow_conflicted saves a conflicted merge change', async (t) => {
  const h = await diverged('allowed', true);
  const res = await s.api('POST', '/acme/allowed/bookmarks/merge', { body: { target: 'main', source: 'feat', allow_conflicted: true } });
  t.equal(res.status, 200);
  t.equal(res.json.merge_type, 'merge_commit');
  t.equal(res.json.is_conflicted, true);
  t.equal(await bookmarkTarget(s, 'allowed', 'main'), res.json.change_id);
  const change = await s.api('GET', `/acme/allowed/changes/${res.json.change_id}`);
  t.equal(change.json.is_conflicted, true);
  t.same(change.json.conflicts, ['a.txt']);
  t.same(change.json.parents, [h.main, h.feat]);
  t.equal(await fileAt('allowed', res.json.change_id, 'a.txt'), '1\n<<<<<<< target\nmain\n||||||| base\n2\n=======\nfeat\n>>>>>>> source\n3\n', 'reads see the materialized view');
});

t.test('merge - whole-file resolutions make the merge clean', async (t) => {
  await diverged('take', true);
  const res = await s.api('POST', '/acme/take/bookmarks/merge', { body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', take: 'source' }] } });
  t.equal(res.status, 200);
  t.equal(res.json.is_conflicted, false);
  t.equal(await fileAt('take', res.json.change_id, 'a.txt'), '1\nfeat\n3\n');

  await diverged('content', true);
  const written = await s.api('POST', '/acme/content/bookmarks/merge', {
    body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', content: Buffer.from('both\n').toString('base64'), encoding: 'base64' }] },
  });
  t.equal(written.json.is_conflicted, false);
  t.equal(await fileAt('content', written.json.change_id, 'a.txt'), 'both\n');

  const h = await diverged('not-conflicted', true);
  const notConflicted = await s.api('POST', '/acme/not-conflicted/bookmarks/merge', {
    body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', take: 'source' }, { path: 'zzz.txt', take: 'target' }] },
  });
  t.equal(notConflicted.status, 400, 'a resolution for a path that is not conflicted is refused');
  t.equal(await bookmarkTarget(s, 'not-conflicted', 'main'), h.main);
});

t.test('merge - a resolution with encoding null is read as UTF-8, like an omitted encoding', async (t) => {
  await diverged('null-encoding', true);
  const res = await s.api('POST', '/acme/null-encoding/bookmarks/merge', {
    body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', content: 'both\n', encoding: null }] },
  });
  t.equal(res.status, 200, res.text);
  t.equal(await fileAt('null-encoding', res.json.change_id, 'a.txt'), 'both\n');
});

t.test('merge - per-hunk resolutions must cover every hunk', async (t) => {
  const h = await diverged('hunks', true);
  const refused = await s.api('POST', '/acme/hunks/bookmarks/merge', { body: { target: 'main', source: 'feat' } });
  const hunkId = refused.json.error.details.conflicts[0].hunks[0].hunk_id as string;

  const wrong = await s.api('POST', '/acme/hunks/bookmarks/merge', {
    body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', hunks: [{ hunk_id: 'ffff', take: 'target' }] }] },
  });
  t.equal(wrong.status, 409);
  t.equal(wrong.json.error.code, 'MERGE_CONFLICT');
  t.same(wrong.json.error.details.conflict_paths, ['a.txt']);
  t.equal(await bookmarkTarget(s, 'hunks', 'main'), h.main);

  const ok = await s.api('POST', '/acme/hunks/bookmarks/merge', {
    body: { target: 'main', source: 'feat', resolutions: [{ path: 'a.txt', hunks: [{ hunk_id: hunkId, content: 'main and feat\n' }] }] },
  });
  t.equal(ok.status, 200);
  t.equal(ok.json.is_conflicted, false);
  t.equal(await fileAt('hunks', ok.json.change_id, 'a.txt'), '1\nmain and feat\n3\n');
});

t.test('merge - take on a conflict of more than two sides is refused', async (t) => {
  const h = await diverged('sides', true);
  const conflicted = await s.api('POST', '/acme/sides/bookmarks/merge', { body: { target: 'main', source: 'feat', allow_conflicted: true } });
  t.equal(conflicted.json.is_conflicted, true);
  const third = await write(s, 'sides', h.base, { 'a.txt': '1\nthird\n3\n' });
  await s.api('POST', '/acme/sides/bookmarks', { body: { name: 'third', change_id: third } });
  const res = await s.api('POST', '/acme/sides/bookmarks/merge', { body: { target: 'main', source: 'third', resolutions: [{ path: 'a.txt', take: 'source' }] } });
  t.equal(res.status, 400);
  t.equal(res.json.error.code, 'INVALID_REQUEST');
  t.equal(await bookmarkTarget(s, 'sides', 'main'), conflicted.json.change_id);

  const byContent = await s.api('POST', '/acme/sides/bookmarks/merge', { body: { target: 'main', source: 'third', resolutions: [{ path: 'a.txt', content: 'one\n' }] } });
  t.equal(byContent.status, 200);
  t.equal(byContent.json.is_conflicted, false, 'content resolves any number of sides');
});

t.test('merge - a source already in the target is a no-op that writes nothing', async (t) => {
  await createRepo(s, 'noop');
  const base = await write(s, 'noop', ROOT, { 'a.txt': BASE });
  const next = await write(s, 'noop', base, { 'b.txt': 'b\n' });
  await s.api('PATCH', '/acme/noop/bookmarks/main', { body: { change_id: next } });
  await s.api('POST', '/acme/noop/bookmarks', { body: { name: 'old', change_id: base } });
  await s.api('POST', '/acme/noop/bookmarks', { body: { name: 'same', change_id: next } });
  const id = await repoId(s, 'noop');
  const opsBefore = operations(s, id).length;
  const commit = (await s.api('GET', `/acme/noop/changes/${next}`)).json.current_commit_oid;
  for (const source of ['old', 'same', 'main']) {
    const res = await s.api('POST', '/acme/noop/bookmarks/merge', { body: { target: 'main', source, delete_source: source !== 'main' } });
    t.equal(res.status, 200);
    t.same(res.json, { merge_type: 'no_op', is_conflicted: false, commit_oid: commit, change_id: next, target: 'main', source, source_deleted: false });
  }
  t.equal(await bookmarkTarget(s, 'noop', 'main'), next);
  t.equal(await bookmarkTarget(s, 'noop', 'old'), base, 'nothing was deleted either');
  t.equal(operations(s, id).length, opsBefore, 'no operation was recorded');

  await s.api('POST', '/acme/noop/bookmarks', { body: { name: 'empty', change_id: ROOT } });
  const fromRoot = await s.api('POST', '/acme/noop/bookmarks/merge', { body: { target: 'main', source: 'empty' } });
  t.equal(fromRoot.json.merge_type, 'no_op', 'the virtual root is in every history');
  const rootIntoRoot = await s.api('POST', '/acme/noop/bookmarks/merge', { body: { target: 'empty', source: 'empty' } });
  t.same(rootIntoRoot.json, { merge_type: 'no_op', is_conflicted: false, commit_oid: '0'.repeat(40), change_id: ROOT, target: 'empty', source: 'empty', source_deleted: false });
});

t.test('merge - delete_source removes the source bookmark in the same operation', async (t) => {
  await diverged('delete', false);
  const res = await s.api('POST', '/acme/delete/bookmarks/merge', { body: { target: 'main', source: 'feat', delete_source: true } });
  t.equal(res.status, 200);
  t.equal(res.json.source_deleted, true);
  t.equal((await s.api('GET', '/acme/delete/bookmarks/feat')).status, 404);

  const h = await diverged('delete-default', false);
  const refused = await s.api('POST', '/acme/delete-default/bookmarks/merge', { body: { target: 'feat', source: 'main', delete_source: true } });
  t.equal(refused.status, 400, 'the default bookmark cannot be the deleted source');
  t.equal(await bookmarkTarget(s, 'delete-default', 'feat'), h.feat, 'and nothing was merged');
});

t.test('merge - unknown bookmarks and bad bodies', async (t) => {
  await createRepo(s, 'merge-errors');
  const target = await s.api('POST', '/acme/merge-errors/bookmarks/merge', { body: { target: 'nope', source: 'main' } });
  t.equal(target.status, 404);
  t.equal(target.json.error.code, 'BRANCH_NOT_FOUND');
  const source = await s.api('POST', '/acme/merge-errors/bookmarks/merge', { body: { target: 'main', source: 'nope' } });
  t.equal(source.json.error.code, 'BRANCH_NOT_FOUND');
  t.equal((await s.api('POST', '/acme/merge-errors/bookmarks/merge', { body: { target: 'main' } })).status, 400);
  t.equal((await s.api('POST', '/acme/merge-errors/bookmarks/merge', { body: { target: 'main', source: 'main', strategy: 'ours' } })).status, 400);
});

t.test('merge - authors: the token claim, else the body, else the key name; the writer commits', async (t) => {
  await diverged('authors', false);
  const claimed = await s.token({ author: [['Agent Seven', 'seven@example.com'], ['Helper', null]] });
  const byClaim = await s.api('POST', '/acme/authors/bookmarks/merge', { token: claimed, body: { target: 'main', source: 'feat', authors: [{ name: 'Ignored', email: null }] } });
  t.equal(byClaim.status, 200);
  const c1 = (await s.api('GET', `/acme/authors/changes/${byClaim.json.change_id}`)).json;
  t.same(c1.authors, [{ name: 'Agent Seven', email: 'seven@example.com' }, { name: 'Helper', email: null }]);
  t.equal(c1.committer.name, 'Agent Seven');

  const side = await write(s, 'authors', ROOT, { 'x.txt': 'x\n' });
  await s.api('POST', '/acme/authors/bookmarks', { body: { name: 'side', change_id: side } });
  const byBody = await s.api('POST', '/acme/authors/bookmarks/merge', {
    body: { target: 'main', source: 'side', author: { name: 'Body Author', email: 'body@example.com', date: '2024-01-02T03:04:05.000Z' } },
  });
  const c2 = (await s.api('GET', `/acme/authors/changes/${byBody.json.change_id}`)).json;
  t.same(c2.authors, [{ name: 'Body Author', email: 'body@example.com' }]);
  t.equal(c2.authored_at, '2024-01-02T03:04:05.000Z');
  t.equal(c2.committer.name, 'test-admin', 'without a claim the key name commits');

  const other = await write(s, 'authors', ROOT, { 'y.txt': 'y\n' });
  await s.api('POST', '/acme/authors/bookmarks', { body: { name: 'other', change_id: other } });
  const byKey = await s.api('POST', '/acme/authors/bookmarks/merge', { body: { target: 'main', source: 'other' } });
  const c3 = (await s.api('GET', `/acme/authors/changes/${byKey.json.change_id}`)).json;
  t.same(c3.authors, [{ name: 'test-admin', email: null }]);
});
