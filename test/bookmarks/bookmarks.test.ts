import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { ROOT, bookmarkTarget, chain, createRepo, write } from './history.js';

const s = await serverForFile(t);

t.test('bookmarks - a new repository lists its default bookmark at the virtual root', async (t) => {
  await createRepo(s, 'fresh');
  const res = await s.api('GET', '/acme/fresh/bookmarks');
  t.equal(res.status, 200);
  t.same(res.json, { bookmarks: [{ name: 'main', change_id: ROOT, is_default: true }], next_cursor: null, has_more: false });
});

t.test('bookmarks - create, get and delete', async (t) => {
  await createRepo(s, 'crud');
  const [c1] = await chain(s, 'crud', ROOT, 1);
  const created = await s.api('POST', '/acme/crud/bookmarks', { body: { name: 'feat/x', change_id: c1 } });
  t.equal(created.status, 201);
  t.same(created.json, { name: 'feat/x', change_id: c1, is_default: false });

  const atRoot = await s.api('POST', '/acme/crud/bookmarks', { body: { name: 'empty', change_id: ROOT } });
  t.equal(atRoot.status, 201, 'the virtual root is a valid target');

  const got = await s.api('GET', '/acme/crud/bookmarks/feat%2Fx');
  t.equal(got.status, 200, 'percent-encoded names are decoded');
  t.same(got.json, { name: 'feat/x', change_id: c1, is_default: false });

  const main = await s.api('GET', '/acme/crud/bookmarks/main');
  t.same(main.json, { name: 'main', change_id: c1, is_default: true }, 'the first write advanced the default bookmark');

  const del = await s.api('DELETE', '/acme/crud/bookmarks/feat%2Fx');
  t.equal(del.status, 200);
  t.same(del.json, { success: true });
  const gone = await s.api('GET', '/acme/crud/bookmarks/feat%2Fx');
  t.equal(gone.status, 404);
  t.equal(gone.json.error.code, 'BRANCH_NOT_FOUND');
  const again = await s.api('DELETE', '/acme/crud/bookmarks/feat%2Fx');
  t.equal(again.json.error.code, 'BRANCH_NOT_FOUND');
});

t.test('bookmarks - create refuses an existing name, an unknown change and a bad name', async (t) => {
  await createRepo(s, 'create-errors');
  const exists = await s.api('POST', '/acme/create-errors/bookmarks', { body: { name: 'main', change_id: ROOT } });
  t.equal(exists.status, 409);
  t.equal(exists.json.error.code, 'BRANCH_EXISTS');

  const unknown = await s.api('POST', '/acme/create-errors/bookmarks', { body: { name: 'x', change_id: 'k'.repeat(32) } });
  t.equal(unknown.status, 404);
  t.equal(unknown.json.error.code, 'CHANGE_NOT_FOUND');

  for (const name of ['a..b', '-x', 'x.lock', 'a b', 'x:y', '/x', 'HEAD']) {
    const bad = await s.api('POST', '/acme/create-errors/bookmarks', { body: { name, change_id: ROOT } });
    t.equal(bad.status, 400, `"${name}" is refused`);
  }
  const missing = await s.api('POST', '/acme/create-errors/bookmarks', { body: { name: 'x' } });
  t.equal(missing.status, 400, 'change_id is required');
  const extra = await s.api('POST', '/acme/create-errors/bookmarks', { body: { name: 'x', change_id: ROOT, force: true } });
  t.equal(extra.status, 400, 'unknown fields are refused');
  const list = await s.api('GET', '/acme/create-errors/bookmarks');
  t.same(list.json.bookmarks.map((b: { name: string }) => b.name), ['main'], 'nothing was created');
});

t.test('bookmarks - a bookmark named "merge" is reachable beside the merge route', async (t) => {
  await createRepo(s, 'named-merge');
  const [c1, c2] = await chain(s, 'named-merge', ROOT, 2);
  t.equal((await s.api('POST', '/acme/named-merge/bookmarks', { body: { name: 'merge', change_id: c1 } })).status, 201);
  t.same((await s.api('GET', '/acme/named-merge/bookmarks/merge')).json, { name: 'merge', change_id: c1, is_default: false });
  const moved = await s.api('PATCH', '/acme/named-merge/bookmarks/merge', { body: { change_id: c2 } });
  t.same(moved.json, { name: 'merge', change_id: c2, is_default: false, from_change_id: c1 });
  t.equal((await s.api('DELETE', '/acme/named-merge/bookmarks/merge')).status, 200);
  t.equal((await s.api('GET', '/acme/named-merge/bookmarks/merge')).status, 404);
});

t.test('bookmarks - deleting the default bookmark is refused', async (t) => {
  await createRepo(s, 'protect');
  const res = await s.api('DELETE', '/acme/protect/bookmarks/main');
  t.equal(res.status, 400);
  t.equal(res.json.error.code, 'INVALID_REQUEST');
  t.match(res.json.error.message, /change the default bookmark first/);
  t.equal(await bookmarkTarget(s, 'protect', 'main'), ROOT);
});

t.test('bookmarks - glob filters: * stays within a segment, ** crosses them, ? is one character', async (t) => {
  await createRepo(s, 'globs');
  for (const name of ['feat/a', 'feat/b', 'feat/a/deep', 'feature', 'fix/a', 'feat']) {
    const res = await s.api('POST', '/acme/globs/bookmarks', { body: { name, change_id: ROOT } });
    t.equal(res.status, 201);
  }
  const names = async (glob: string): Promise<string[]> => {
    const res = await s.api('GET', `/acme/globs/bookmarks?glob=${encodeURIComponent(glob)}`);
    t.equal(res.status, 200);
    return res.json.bookmarks.map((b: { name: string }) => b.name);
  };
  t.same(await names('feat/*'), ['feat/a', 'feat/b']);
  t.same(await names('feat/**'), ['feat/a', 'feat/a/deep', 'feat/b']);
  t.same(await names('feat*'), ['feat', 'feature']);
  t.same(await names('*/a'), ['feat/a', 'fix/a']);
  t.same(await names('fea?'), ['feat']);
  t.same(await names('feat/?'), ['feat/a', 'feat/b']);
  t.same(await names('main'), ['main']);
  t.same(await names('nothing*'), []);
});

t.test('bookmarks - a glob built to backtrack answers at once and the server stays responsive', async (t) => {
  await createRepo(s, 'glob-bomb');
  const name = 'a'.repeat(35);
  t.equal((await s.api('POST', '/acme/glob-bomb/bookmarks', { body: { name, change_id: ROOT } })).status, 201);
  // As a backtracking regular expression this takes seconds per name for 12 pairs and doubles per pair.
  const glob = `${'*?'.repeat(24)}zz`;
  const listing = fetch(`${s.url}/v1/acme/glob-bomb/bookmarks?glob=${encodeURIComponent(glob)}`, {
    headers: { authorization: `Bearer ${await s.token()}` },
    signal: AbortSignal.timeout(5000),
  });
  const health = await fetch(`${s.url}/healthz`, { signal: AbortSignal.timeout(5000) });
  t.equal(health.status, 200, '/healthz answers while the listing runs');
  const res = await listing;
  t.equal(res.status, 200);
  t.same(((await res.json()) as { bookmarks: unknown[] }).bookmarks, [], 'nothing ends in zz');
  const long = await s.api('GET', `/acme/glob-bomb/bookmarks?glob=${'a'.repeat(257)}`);
  t.equal(long.status, 400, 'a glob over 256 characters is refused');
  t.equal(long.json.error.code, 'INVALID_REQUEST');
});

t.test('bookmarks - pages by name with a cursor, also under a glob', async (t) => {
  await createRepo(s, 'pages');
  const made = ['b-1', 'b-2', 'b-3', 'b-4', 'b-5', 'c-1'];
  for (const name of made) await s.api('POST', '/acme/pages/bookmarks', { body: { name, change_id: ROOT } });
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const q: string = `limit=2${cursor ? `&cursor=${cursor}` : ''}`;
    const res = await s.api('GET', `/acme/pages/bookmarks?${q}`);
    t.equal(res.status, 200);
    t.ok(res.json.bookmarks.length <= 2);
    seen.push(...res.json.bookmarks.map((b: { name: string }) => b.name));
    cursor = res.json.next_cursor;
    t.equal(res.json.has_more, cursor !== null);
    pages++;
    if (pages === 1) {
      // An insert before the cursor position must not shift the following pages.
      await s.api('POST', '/acme/pages/bookmarks', { body: { name: 'a-0', change_id: ROOT } });
    }
  } while (cursor);
  t.same(seen, [...made, 'main'].sort(), 'every bookmark once, in name order');

  const globbed: string[] = [];
  cursor = null;
  do {
    const res = await s.api('GET', `/acme/pages/bookmarks?glob=b-*&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    globbed.push(...res.json.bookmarks.map((b: { name: string }) => b.name));
    cursor = res.json.next_cursor;
  } while (cursor);
  t.same(globbed, ['b-1', 'b-2', 'b-3', 'b-4', 'b-5']);

  t.equal((await s.api('GET', '/acme/pages/bookmarks?limit=201')).status, 400, 'limit is at most 200');
  t.equal((await s.api('GET', '/acme/pages/bookmarks?limit=0')).status, 400);
  t.equal((await s.api('GET', '/acme/pages/bookmarks?cursor=nonsense')).status, 400, 'a malformed cursor is refused');
  t.equal((await s.api('GET', '/acme/pages/bookmarks?sort=name')).status, 400, 'unknown query keys are refused');
});

t.test('bookmarks - a forward move succeeds and reports where the bookmark came from', async (t) => {
  await createRepo(s, 'forward');
  const [c1, c2, c3] = await chain(s, 'forward', ROOT, 3);
  await s.api('PATCH', '/acme/forward/bookmarks/main', { body: { change_id: c1, allow_backwards: true } });
  const res = await s.api('PATCH', '/acme/forward/bookmarks/main', { body: { change_id: c3 } });
  t.equal(res.status, 200);
  t.same(res.json, { name: 'main', change_id: c3, is_default: true, from_change_id: c1 });
  t.equal(await bookmarkTarget(s, 'forward', 'main'), c3);
  const same = await s.api('PATCH', '/acme/forward/bookmarks/main', { body: { change_id: c3 } });
  t.same(same.json, { name: 'main', change_id: c3, is_default: true, from_change_id: c3 }, 'a move onto the current target is accepted');
  t.ok(c2);
});

t.test('bookmarks - backward move without allow_backwards is refused with the names', async (t) => {
  await createRepo(s, 'backward');
  const [c1, c2] = await chain(s, 'backward', ROOT, 2);
  t.equal(await bookmarkTarget(s, 'backward', 'main'), c1, 'only the first write advanced the default bookmark');
  t.equal((await s.api('PATCH', '/acme/backward/bookmarks/main', { body: { change_id: c2 } })).status, 200);
  const refused = await s.api('PATCH', '/acme/backward/bookmarks/main', { body: { change_id: c1 } });
  t.equal(refused.status, 409);
  t.equal(refused.json.error.code, 'BOOKMARK_MOVE_HISTORY_REWRITE');
  t.same(refused.json.error.details.bookmark_names, ['main']);
  t.equal(await bookmarkTarget(s, 'backward', 'main'), c2, 'the bookmark did not move');

  const toRoot = await s.api('PATCH', '/acme/backward/bookmarks/main', { body: { change_id: ROOT } });
  t.equal(toRoot.json.error.code, 'BOOKMARK_MOVE_HISTORY_REWRITE', 'moving back to the root rewrites history too');

  const allowed = await s.api('PATCH', '/acme/backward/bookmarks/main', { body: { change_id: c1, allow_backwards: true } });
  t.equal(allowed.status, 200);
  t.same(allowed.json, { name: 'main', change_id: c1, is_default: true, from_change_id: c2 });
});

t.test('bookmarks - sideways move is refused unless allow_backwards', async (t) => {
  await createRepo(s, 'sideways');
  const [base] = await chain(s, 'sideways', ROOT, 1);
  const left = await write(s, 'sideways', base!, { 'l.txt': 'left\n' });
  const right = await write(s, 'sideways', base!, { 'r.txt': 'right\n' });
  await s.api('POST', '/acme/sideways/bookmarks', { body: { name: 'topic', change_id: left } });
  const refused = await s.api('PATCH', '/acme/sideways/bookmarks/topic', { body: { change_id: right } });
  t.equal(refused.status, 409);
  t.same(refused.json.error.details.bookmark_names, ['topic']);
  t.equal(await bookmarkTarget(s, 'sideways', 'topic'), left);
  const forced = await s.api('PATCH', '/acme/sideways/bookmarks/topic', { body: { change_id: right, allow_backwards: true } });
  t.equal(forced.status, 200);
  t.equal(forced.json.from_change_id, left);
});

t.test('bookmarks - move errors: unknown bookmark, unknown change, stale expected_change_id', async (t) => {
  await createRepo(s, 'move-errors');
  const [c1, c2] = await chain(s, 'move-errors', ROOT, 2);
  const noBookmark = await s.api('PATCH', '/acme/move-errors/bookmarks/nope', { body: { change_id: c1 } });
  t.equal(noBookmark.status, 404);
  t.equal(noBookmark.json.error.code, 'BRANCH_NOT_FOUND');
  const noChange = await s.api('PATCH', '/acme/move-errors/bookmarks/main', { body: { change_id: 'k'.repeat(32) } });
  t.equal(noChange.status, 404);
  t.equal(noChange.json.error.code, 'CHANGE_NOT_FOUND');

  await s.api('POST', '/acme/move-errors/bookmarks', { body: { name: 'guarded', change_id: c1 } });
  const stale = await s.api('PATCH', '/acme/move-errors/bookmarks/guarded', { body: { change_id: c2, expected_change_id: ROOT } });
  t.equal(stale.status, 409);
  t.equal(stale.json.error.code, 'ABORTED');
  t.equal(await bookmarkTarget(s, 'move-errors', 'guarded'), c1);
  const fresh = await s.api('PATCH', '/acme/move-errors/bookmarks/guarded', { body: { change_id: c2, expected_change_id: c1 } });
  t.equal(fresh.status, 200);
  t.equal(fresh.json.change_id, c2);
});

t.test('bookmarks - multi-move applies all moves atomically', async (t) => {
  await createRepo(s, 'multi');
  const [c1, c2, c3] = await chain(s, 'multi', ROOT, 3);
  for (const name of ['a', 'b', 'c']) await s.api('POST', '/acme/multi/bookmarks', { body: { name, change_id: c1 } });
  const ok = await s.api('PATCH', '/acme/multi/bookmarks', {
    body: { moves: [{ name: 'a', change_id: c2 }, { name: 'b', change_id: c3, expected_change_id: c1 }] },
  });
  t.equal(ok.status, 200);
  t.same(ok.json, {
    bookmarks: [
      { name: 'a', change_id: c2, is_default: false },
      { name: 'b', change_id: c3, is_default: false },
    ],
  });

  // One forward move, two refused (backward and to the root): nothing changes, both refused are named.
  const refused = await s.api('PATCH', '/acme/multi/bookmarks', {
    body: { moves: [{ name: 'c', change_id: c3 }, { name: 'a', change_id: c1 }, { name: 'b', change_id: ROOT }] },
  });
  t.equal(refused.status, 409);
  t.equal(refused.json.error.code, 'BOOKMARK_MOVE_HISTORY_REWRITE');
  t.same(refused.json.error.details.bookmark_names, ['a', 'b']);
  t.equal(await bookmarkTarget(s, 'multi', 'c'), c1, 'the acceptable move was not applied either');
  t.equal(await bookmarkTarget(s, 'multi', 'a'), c2);
  t.equal(await bookmarkTarget(s, 'multi', 'b'), c3);

  const guarded = await s.api('PATCH', '/acme/multi/bookmarks', {
    body: { moves: [{ name: 'c', change_id: c3 }, { name: 'a', change_id: c3, expected_change_id: c1 }] },
  });
  t.equal(guarded.json.error.code, 'ABORTED', 'a stale guard aborts the whole batch');
  t.equal(await bookmarkTarget(s, 'multi', 'c'), c1);

  const missing = await s.api('PATCH', '/acme/multi/bookmarks', { body: { moves: [{ name: 'c', change_id: c3 }, { name: 'zz', change_id: c3 }] } });
  t.equal(missing.json.error.code, 'BRANCH_NOT_FOUND');
  t.equal(await bookmarkTarget(s, 'multi', 'c'), c1);

  const twice = await s.api('PATCH', '/acme/multi/bookmarks', { body: { moves: [{ name: 'c', change_id: c2 }, { name: 'c', change_id: c3 }] } });
  t.equal(twice.status, 400, 'a name moved twice is refused');
  t.equal((await s.api('PATCH', '/acme/multi/bookmarks', { body: { moves: [] } })).status, 400);

  const backwards = await s.api('PATCH', '/acme/multi/bookmarks', {
    body: { moves: [{ name: 'c', change_id: c3 }, { name: 'a', change_id: c1, allow_backwards: true }] },
  });
  t.equal(backwards.status, 200);
  t.equal(await bookmarkTarget(s, 'multi', 'c'), c3);
  t.equal(await bookmarkTarget(s, 'multi', 'a'), c1);
});

t.test('bookmarks - reads need git:read, writes need git:write', async (t) => {
  await createRepo(s, 'scopes');
  const read = await s.token({ scopes: ['read'] });
  t.equal((await s.api('GET', '/acme/scopes/bookmarks', { token: read })).status, 200);
  t.equal((await s.api('GET', '/acme/scopes/bookmarks/main', { token: read })).status, 200);
  const denied = await s.api('POST', '/acme/scopes/bookmarks', { token: read, body: { name: 'x', change_id: ROOT } });
  t.equal(denied.status, 403);
  const metaOnly = await s.token({ scopes: ['repo:read'] });
  t.equal((await s.api('GET', '/acme/scopes/bookmarks', { token: metaOnly })).status, 403, 'repo:read covers repository metadata only');
  t.equal((await s.api('GET', '/acme/nope/bookmarks')).json.error.code, 'REPO_NOT_FOUND');
});
