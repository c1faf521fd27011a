import t from 'tap';
import { createHash } from 'node:crypto';
import { startEventLog } from '../helpers/webhook-receiver.js';
import { ROOT, applyOps, exportRepo, startWithRepo, write, type RepoFixture } from './helpers.js';

const b64 = (text: string): string => Buffer.from(text).toString('base64');

async function content(f: RepoFixture, changeId: string, path: string): Promise<{ status: number; text: string | null; mode: string | null; metadata: unknown }> {
  const res = await f.s.api('GET', `${f.base}/content?change_id=${changeId}&path=${encodeURIComponent(path)}`);
  return {
    status: res.status,
    text: res.status === 200 && res.json.content !== undefined ? Buffer.from(res.json.content, 'base64').toString('utf8') : null,
    mode: res.json?.mode ?? null,
    metadata: res.json?.metadata,
  };
}

t.test('changes - create and evolve through /changes: messages, authors, trailers, guards', async (t) => {
  const f = await startWithRepo(t, 'people');

  const created = await f.s.api('POST', `${f.base}/changes`, { body: { base_change_id: ROOT, files: [{ path: 'a.txt', content: b64('a\n') }] } });
  t.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  t.equal(created.json.message, '', 'an omitted message is no description');
  t.same(created.json.authors, [{ name: 'test-admin', email: null }], 'without claims or body: the key name, no email');
  t.same(created.json.author, { name: 'test-admin', email: '', date: created.json.authored_at });
  t.same(created.json.parents, [ROOT]);
  t.equal((await f.s.api('GET', f.base)).json.head_change_id, id, 'the first write advanced the default bookmark');

  // PATCH: omitted message is kept, "" clears, a string replaces; authors replaced by the body.
  const described = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { message: 'describe it' } });
  t.equal(described.status, 200, described.text);
  t.equal(described.json.message, 'describe it');
  t.equal(described.json.id, id);
  const kept = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { files: [{ path: 'b.txt', content: b64('b\n') }] } });
  t.equal(kept.json.message, 'describe it', 'an omitted message is kept');
  t.equal(kept.json.authored_at, created.json.authored_at, 'the author time is kept on evolve');
  const cleared = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { message: '' } });
  t.equal(cleared.json.message, '', '"" clears the description');
  const same = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { message: '' } });
  t.equal(same.json.current_commit_oid, cleared.json.current_commit_oid, 'a PATCH that changes nothing writes nothing');

  const reauthored = await f.s.api('PATCH', `${f.base}/changes/${id}`, {
    body: { authors: [{ name: 'Cy', email: 'cy@example.com' }, { name: 'Dee', email: null }], message: 'by Cy and Dee' },
  });
  t.same(reauthored.json.authors, [{ name: 'Cy', email: 'cy@example.com' }, { name: 'Dee', email: null }]);
  t.same(reauthored.json.committer.name, 'test-admin', 'the committer is the writer');

  // Guards: stale → ABORTED, current → applies.
  const stale = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { base_commit_oid: created.json.current_commit_oid, message: 'late' } });
  t.equal(stale.status, 409);
  t.equal(stale.json.error.code, 'ABORTED');
  const fresh = await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { base_commit_oid: reauthored.json.current_commit_oid, message: 'on time' } });
  t.equal(fresh.status, 200, fresh.text);

  // A token's author claim wins over the body; co-authors become trailers the message hides.
  const token = await f.s.token({ author: [['Ada', 'ada@example.com'], ['Bob', null]] });
  const claimed = await f.s.api('POST', `${f.base}/changes`, {
    token,
    body: { base_change_id: id, message: 'from a token', authors: [{ name: 'Ignored', email: 'x@y' }], attribution: { provider: 'claude', model: 'claude-sonnet-4-5' }, files: [] },
  });
  t.equal(claimed.status, 201, claimed.text);
  t.same(claimed.json.authors, [{ name: 'Ada', email: 'ada@example.com' }, { name: 'Bob', email: null }]);
  t.equal(claimed.json.message, 'from a token', 'managed trailers never show in message');
  t.same(claimed.json.committer.name, 'Ada', "the writer is the token's first author");

  // Body authors apply without a claim; author.date sets the author time.
  const dated = await f.s.api('POST', `${f.base}/changes`, {
    body: { base_change_id: id, author: { name: 'Eve', email: 'eve@example.com', date: '2024-02-03T04:05:06.000Z' }, files: [] },
  });
  t.same(dated.json.authors, [{ name: 'Eve', email: 'eve@example.com' }]);
  t.equal(dated.json.authored_at, '2024-02-03T04:05:06.000Z');
  t.same(dated.json.author, { name: 'Eve', email: 'eve@example.com', date: '2024-02-03T04:05:06.000Z' });

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null);
  const raw = x.git('cat-file', '-p', claimed.json.current_commit_oid).stdout;
  t.match(raw, /\nauthor Ada <ada@example\.com> \d+ \+0000\ncommitter Ada <ada@example\.com> \d+ \+0000\nchange-id [k-z]{32}\n/);
  t.match(raw, /\n\nfrom a token\n\nCo-authored-by: Bob\nAI-Provider: claude\nAI-Model: claude-sonnet-4-5$/);
  t.match(x.git('cat-file', '-p', reauthored.json.current_commit_oid).stdout, /Co-authored-by: Dee\n?$/);
});

t.test('apply-ops - file operations, modes, metadata, blobs', async (t) => {
  const f = await startWithRepo(t, 'files');
  const first = await applyOps(f, {
    base_change_id: ROOT,
    ops: [
      write('src/a.ts', 'export const a = 1;\n'),
      write('src/lib/b.ts', 'b\n'),
      { op: 'write', path: 'run.sh', content: '#!/bin/sh\necho hi\n', mode: '100755' },
      { op: 'write', path: 'link', content: 'src/a.ts', mode: '120000' },
      { op: 'write', path: 'bin.dat', content: b64('\u0000\u0001\u0002'), encoding: 'base64' },
      { op: 'set_metadata', path: 'src/a.ts', metadata: { owner: 'team-a', stage: 'draft' } },
    ],
  });
  t.equal(first.status, 201, first.text);
  const id = first.json.change.id as string;
  t.same((await content(f, id, 'src/a.ts')).metadata, { owner: 'team-a', stage: 'draft' });

  const second = await applyOps(f, {
    change_id: id,
    ops: [
      write('run.sh', '#!/bin/sh\necho bye\n'),
      { op: 'rename', from: 'src/lib', to: 'lib' },
      { op: 'delete', path: 'bin.dat' },
      { op: 'set_metadata', path: 'src/a.ts', metadata: { stage: null, reviewed: 'yes' } },
    ],
  });
  t.equal(second.status, 200, second.text);
  t.same(second.json.bookmarks, []);
  t.match(second.json.operation_id, /^op_/);
  t.equal((await content(f, id, 'run.sh')).mode, '100755', 'a rewrite without mode keeps the executable bit');
  t.equal((await content(f, id, 'lib/b.ts')).text, 'b\n', 'a directory rename moves its files');
  t.equal((await content(f, id, 'src/lib/b.ts')).status, 404);
  t.equal((await content(f, id, 'bin.dat')).status, 404);
  t.same((await content(f, id, 'src/a.ts')).metadata, { owner: 'team-a', reviewed: 'yes' }, 'metadata merges; null removes a key');
  const deleted = await applyOps(f, { change_id: id, ops: [{ op: 'delete', path: 'src' }] });
  t.equal(deleted.status, 200);
  t.equal((await content(f, id, 'src/a.ts')).status, 404, 'deleting a directory deletes its subtree');
  const detail = await f.s.api('GET', `${f.base}/changes/${id}`);
  t.same(detail.json.files.sort(), ['lib/b.ts', 'link', 'run.sh']);

  // Ops apply strictly in order: each sees the tree the ops before it made.
  const inOrder = await applyOps(f, {
    change_id: id,
    ops: [write('docs/a.md', 'a\n'), { op: 'set_metadata', path: 'docs/a.md', metadata: { k: 'v' } }, { op: 'delete', path: 'docs' }],
  });
  t.equal(inOrder.status, 200, `metadata of a file written earlier in the batch, then deleted: ${inOrder.text}`);
  t.equal((await content(f, id, 'docs/a.md')).status, 404, 'the later delete applied');
  const tooEarly = await applyOps(f, { change_id: id, ops: [{ op: 'set_metadata', path: 'new.md', metadata: { k: 'v' } }, write('new.md', 'n\n')] });
  t.equal(tooEarly.status, 404, 'metadata of a file written only later in the batch');
  t.equal(tooEarly.json.error.details.op_index, 0);
  t.match(tooEarly.json.error.message, /^ops\[0\]: cannot set metadata of "new.md"/);
  const afterDelete = await applyOps(f, { change_id: id, ops: [{ op: 'delete', path: 'run.sh' }, { op: 'set_metadata', path: 'run.sh', metadata: { k: 'v' } }] });
  t.equal(afterDelete.status, 404, 'metadata of a file deleted earlier in the batch');
  t.equal(afterDelete.json.error.details.op_index, 1);
  t.equal((await content(f, id, 'run.sh')).status, 200, 'a refused batch changed nothing');

  // Raw uploads: with and without a declared length, then referenced by blob_oid.
  const bytes = Buffer.alloc(3 * 1024 * 1024 + 5);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 251;
  const gitOid = createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
  const declared = await fetch(`${f.s.url}/v1${f.base}/blobs`, { method: 'POST', headers: { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/octet-stream' }, body: bytes });
  t.equal(declared.status, 201);
  t.same(await declared.json(), { oid: gitOid, size: bytes.length });
  const streamed = await fetch(`${f.s.url}/v1${f.base}/blobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/octet-stream' },
    body: new ReadableStream({
      start(c) {
        for (let pos = 0; pos < bytes.length; pos += 100_000) c.enqueue(bytes.subarray(pos, pos + 100_000));
        c.close();
      },
    }),
    duplex: 'half',
  });
  t.equal(streamed.status, 201);
  t.same(await streamed.json(), { oid: gitOid, size: bytes.length }, 'the same bytes without a length: same oid');
  const small = await fetch(`${f.s.url}/v1${f.base}/blobs`, { method: 'POST', headers: { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/octet-stream' }, body: 'tiny' });
  t.equal(((await small.json()) as { size: number }).size, 4);
  const usesBlob = await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'assets/big.bin', blob_oid: gitOid }] });
  t.equal(usesBlob.status, 200, usesBlob.text);
  await f.s.api('POST', `/${f.s.org}/repos`, { body: { name: 'other' } });
  const otherRepo = await f.s.api('POST', `/${f.s.org}/other/apply-ops`, { body: { base_change_id: ROOT, ops: [{ op: 'write', path: 'x.bin', blob_oid: gitOid }] } });
  t.equal(otherRepo.status, 404, 'a blob of another repository is not found');
  t.equal(otherRepo.json.error.code, 'NOT_FOUND');

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null);
  const commit = usesBlob.json.change.current_commit_oid as string;
  t.equal(x.git('rev-parse', `${commit}:assets/big.bin`).stdout.trim(), gitOid);
  t.ok(x.git('cat-file', 'blob', gitOid).raw.equals(bytes), 'the uploaded blob reads back byte-identical');
  t.match(x.git('ls-tree', commit).stdout, /120000 blob [0-9a-f]{40}\tlink\n/);
  t.equal(x.git('cat-file', 'blob', `${commit}:link`).stdout, 'src/a.ts');
});

t.test('apply-ops - bookmarks move with the write atomically and follow the history rule', async (t) => {
  // The event log first, so that it sees everything about the repository from its creation.
  const { s } = await startWithRepo(t, 'unused');
  const log = await startEventLog(s);
  t.teardown(() => log.close());
  t.equal((await s.api('POST', `/${s.org}/repos`, { body: { name: 'marks' } })).status, 201);
  const f: RepoFixture = { s, repo: 'marks', base: `/${s.org}/marks` };
  const a = await applyOps(f, { base_change_id: ROOT, ops: [write('a', 'a')], bookmarks: [{ name: 'feature/x', create: true }] });
  t.equal(a.status, 201, a.text);
  t.same(a.json.bookmarks.map((b: { name: string }) => b.name).sort(), ['feature/x', 'main'], 'the first write also advanced main');
  const aId = a.json.change.id as string;
  const b = await applyOps(f, { base_change_id: aId, ops: [write('b', 'b')], bookmarks: [{ name: 'feature/x' }] });
  t.same(b.json.bookmarks, [{ name: 'feature/x', change_id: b.json.change.id, is_default: false }]);

  const countChanges = async (): Promise<number> => (await f.s.api('GET', `${f.base}/changes?bookmark=feature/x&limit=200`)).json.changes.length;
  const missing = await applyOps(f, { base_change_id: b.json.change.id, ops: [write('c', 'c')], bookmarks: [{ name: 'nope' }] });
  t.equal(missing.status, 404);
  t.equal(missing.json.error.code, 'BRANCH_NOT_FOUND');

  // A sibling of b is not a descendant of it: refused for every named bookmark, nothing written.
  const sideways = await applyOps(f, { base_change_id: aId, ops: [write('s', 's')], bookmarks: [{ name: 'feature/x' }, { name: 'main' }] });
  t.equal(sideways.status, 409);
  t.equal(sideways.json.error.code, 'BOOKMARK_MOVE_HISTORY_REWRITE');
  t.same(sideways.json.error.details.bookmark_names, ['feature/x'], 'main (at a) may advance; feature/x (at b) may not');
  t.equal(await countChanges(), 2, 'a refused move writes no change');
  const forced = await applyOps(f, { base_change_id: aId, ops: [write('s', 's')], bookmarks: [{ name: 'feature/x', allow_backwards: true }] });
  t.equal(forced.status, 201, forced.text);

  const guard = await applyOps(f, { base_change_id: forced.json.change.id, ops: [], bookmarks: [{ name: 'feature/x', expected_change_id: b.json.change.id }] });
  t.equal(guard.status, 409);
  t.equal(guard.json.error.code, 'ABORTED');
  const guarded = await applyOps(f, { base_change_id: forced.json.change.id, ops: [], bookmarks: [{ name: 'feature/x', expected_change_id: forced.json.change.id }] });
  t.equal(guarded.status, 201, guarded.text);
  const twice = await applyOps(f, { base_change_id: aId, ops: [], bookmarks: [{ name: 'x', create: true }, { name: 'x', create: true }] });
  t.equal(twice.status, 400);
  const badName = await applyOps(f, { base_change_id: aId, ops: [], bookmarks: [{ name: 'bad..name', create: true }] });
  t.equal(badName.status, 400);

  await log.settled(20_000);
  const events = log.events('marks').filter((e) => e.type.startsWith('bookmark.'));
  t.same(
    events.map((e) => [e.type, (e.data.bookmark as { name: string }).name]),
    [
      ['bookmark.created', 'main'],
      ['bookmark.moved', 'main'],
      ['bookmark.created', 'feature/x'],
      ['bookmark.moved', 'feature/x'],
      ['bookmark.moved', 'feature/x'],
      ['bookmark.moved', 'feature/x'],
    ],
    'one event per creation and move; none for refused moves',
  );
  t.same(events[1]!.data.from, { change_id: ROOT, commit_oid: '0'.repeat(40) });
  t.same(events[3]!.data.from, { change_id: aId, commit_oid: a.json.change.current_commit_oid });
  t.same(events[2]!.data.bookmark, { name: 'feature/x', is_default: false, change_id: aId, commit_oid: a.json.change.current_commit_oid });
});

t.test('changes - lists are topological, pinned to the first page, and paginate', async (t) => {
  const f = await startWithRepo(t, 'lists');
  t.same((await f.s.api('GET', `${f.base}/changes`)).json, { changes: [], next_cursor: null, has_more: false }, 'an empty repository lists nothing');
  const ids: string[] = [];
  let base = ROOT;
  for (let i = 0; i < 7; i++) {
    const r = await applyOps(f, { base_change_id: base, message: `c${i}`, ops: [write(`f${i}`, `${i}`)], bookmarks: i === 0 ? [] : [{ name: 'main' }] });
    base = r.json.change.id;
    ids.push(base);
  }
  const page1 = await f.s.api('GET', `${f.base}/changes?limit=3`);
  t.same(page1.json.changes.map((c: { id: string }) => c.id), [ids[6], ids[5], ids[4]]);
  t.equal(page1.json.has_more, true);
  // Writes between pages: main moves on, an old change evolves.
  await applyOps(f, { base_change_id: ids[6], ops: [write('later', 'x')], bookmarks: [{ name: 'main' }] });
  await applyOps(f, { change_id: ids[2], ops: [write('f2', 'changed')] });
  const page2 = await f.s.api('GET', `${f.base}/changes?limit=3&cursor=${page1.json.next_cursor}`);
  t.same(page2.json.changes.map((c: { id: string }) => c.id), [ids[3], ids[2], ids[1]], 'the cursor walks the pinned history');
  const page3 = await f.s.api('GET', `${f.base}/changes?limit=3&cursor=${page2.json.next_cursor}`);
  t.same(page3.json.changes.map((c: { id: string }) => c.id), [ids[0]]);
  t.equal(page3.json.has_more, false);
  t.equal(page3.json.next_cursor, null);
  t.equal((await f.s.api('GET', `${f.base}/changes`)).json.changes.length, 8, 'a new first page sees the moved bookmark');

  // A merge of a side branch: parents are listed after the merge, each change once.
  const side = await applyOps(f, { base_change_id: ids[0], ops: [write('side', 's')], bookmarks: [{ name: 'side', create: true }] });
  const merged = await f.s.api('POST', `${f.base}/bookmarks/merge`, { body: { target: 'main', source: 'side' } });
  t.equal(merged.status, 200, merged.text);
  const all = (await f.s.api('GET', `${f.base}/changes?limit=200`)).json.changes as Array<{ id: string; parents: string[] }>;
  const order = all.map((c) => c.id);
  t.equal(order[0], merged.json.change_id, 'the merge comes first');
  for (const [i, c] of all.entries()) for (const p of c.parents) if (p !== ROOT) t.ok(order.indexOf(p) > i, 'every parent after its child');
  t.ok(order.includes(side.json.change.id));
  t.equal(new Set(order).size, order.length, 'no change listed twice');
  // One at a time, the cursor carries the walk's frontier across the merge.
  const single: string[] = [];
  let cursor = '';
  for (;;) {
    const page = await f.s.api('GET', `${f.base}/changes?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    single.push(...page.json.changes.map((c: { id: string }) => c.id));
    if (!page.json.has_more) break;
    cursor = page.json.next_cursor;
  }
  t.same(single, order, 'pages of one list the same order');

  t.equal((await f.s.api('GET', `${f.base}/changes?bookmark=nope`)).json.error.code, 'BRANCH_NOT_FOUND');
  t.equal((await f.s.api('GET', `${f.base}/changes?cursor=garbage`)).status, 400);
  t.equal((await f.s.api('GET', `${f.base}/changes?limit=201`)).status, 400);
  const readOnly = await f.s.token({ scopes: ['read'] });
  t.equal((await f.s.api('GET', `${f.base}/changes`, { token: readOnly })).status, 403, 'the list needs the write scope, as the brief says');
  t.equal((await f.s.api('GET', `${f.base}/changes/${ids[0]}`, { token: readOnly })).status, 200, 'one change is a read');
  t.equal((await f.s.api('GET', `${f.base}/changes`, { token: await f.s.token({ scopes: ['git:write'] }) })).status, 200);

  // Evolution pages, newest first.
  for (let i = 0; i < 4; i++) await applyOps(f, { change_id: ids[0], message: `v${i}` });
  const evo: string[] = [];
  cursor = '';
  for (;;) {
    const page = await f.s.api('GET', `${f.base}/changes/${ids[0]}/evolution?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    evo.push(...page.json.evolution.map((e: { commit_oid: string }) => e.commit_oid));
    if (!page.json.has_more) break;
    cursor = page.json.next_cursor;
  }
  const current = (await f.s.api('GET', `${f.base}/changes/${ids[0]}`)).json.current_commit_oid;
  t.equal(evo.length, 5, 'the creation and four evolves');
  t.equal(evo[0], current);
});

t.test('apply-ops - an Idempotency-Key replays the first answer without writing twice', async (t) => {
  const f = await startWithRepo(t, 'idem');
  const body = { base_change_id: ROOT, ops: [write('a', 'a')] };
  const headers = { 'idempotency-key': 'write-1' };
  const first = await f.s.api('POST', `${f.base}/apply-ops`, { body, headers });
  const again = await f.s.api('POST', `${f.base}/apply-ops`, { body, headers });
  t.equal(first.status, 201);
  t.equal(again.status, 201);
  t.same(again.json, first.json);
  t.equal((await f.s.api('GET', `${f.base}/changes`)).json.changes.length, 1);
});
