import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, applyOps, startWithRepo, write } from '../changes/helpers.js';

/**
 * The front end keeps decoded repository records, bookmarks, changes and small blobs in memory.
 * Each case reads first (so the value is cached), writes, and reads again at once: the second
 * read must show the write, for every kind of record the cache holds.
 *
 * The data lives in memory where the machine offers it: a write is acknowledged once flushed, so
 * the quicker the flush, the sooner a read follows the commit — the tightest case for every
 * thread's read snapshot to have been renewed.
 */
const memoryDir = (): string => mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'repohost-test-'));

t.test('a read right after an acknowledged write shows it, though the first read was cached', async (t) => {
  const f = await startWithRepo(t, 'fresh', { dataDir: memoryDir() });
  const { s } = f;
  const content = (path: string) => s.api('GET', `${f.base}/content?path=${encodeURIComponent(path)}`);

  const first = await applyOps(f, { base_change_id: ROOT, ops: [write('a.txt', 'one\n')], bookmarks: [{ name: 'main', create: true }] });
  t.equal(first.status, 201, first.text);
  const changeId = first.json.change.id as string;

  t.test('file content and head change after an evolve', async (t) => {
    for (let i = 0; i < 3; i++) t.equal(Buffer.from((await content('a.txt')).json.content, 'base64').toString(), 'one\n');
    const evolved = await applyOps(f, { change_id: changeId, ops: [write('a.txt', 'two\n')] });
    t.equal(evolved.status, 200, evolved.text);
    t.equal(Buffer.from((await content('a.txt')).json.content, 'base64').toString(), 'two\n');
    const change = await s.api('GET', `${f.base}/changes/${changeId}`);
    t.match(evolved.json.change.current_commit_oid, /^[0-9a-f]{40}$/);
    t.not(evolved.json.change.current_commit_oid, first.json.change.current_commit_oid, 'the evolve made a new commit');
    t.equal(change.json.current_commit_oid, evolved.json.change.current_commit_oid, 'the change shows its new commit');
  });

  t.test('raw bytes after an evolve, a bookmark moved back, a new default bookmark', async (t) => {
    const raw = async (query: string): Promise<string> => {
      const got = await s.api('GET', `${f.base}/content?${query}`, { headers: { accept: 'application/octet-stream' } });
      t.equal(got.status, 200, got.text);
      return got.text;
    };
    const base = await applyOps(f, { base_change_id: ROOT, ops: [write('r.txt', 'r1\n')], bookmarks: [{ name: 'raw', create: true }] });
    t.equal(base.status, 201, base.text);
    const rawId = base.json.change.id as string;
    for (let i = 0; i < 3; i++) t.equal(await raw(`change_id=${rawId}&path=r.txt`), 'r1\n');
    t.equal((await applyOps(f, { change_id: rawId, ops: [write('r.txt', 'r2\n')] })).status, 200);
    t.equal(await raw(`change_id=${rawId}&path=r.txt`), 'r2\n', 'the change\'s new commit');
    const next = await applyOps(f, { base_change_id: rawId, ops: [write('r.txt', 'r3\n')], bookmarks: [{ name: 'raw' }] });
    t.equal(next.status, 201, next.text);
    t.equal((await s.api('PATCH', f.base, { body: { default_bookmark: 'raw' } })).status, 200);
    t.equal(await raw('path=r.txt'), 'r3\n', 'the new default bookmark\'s head');
    const back = await s.api('PATCH', `${f.base}/bookmarks/raw`, { body: { change_id: rawId, allow_backwards: true } });
    t.equal(back.status, 200, back.text);
    t.equal(await raw('path=r.txt'), 'r2\n', 'the bookmark moved back');
    t.equal((await s.api('PATCH', f.base, { body: { default_bookmark: 'main' } })).status, 200);
    t.equal((await s.api('GET', `${f.base}/content?path=r.txt`, { headers: { accept: 'application/octet-stream' } })).status, 404, 'main has no r.txt');
  });

  t.test('a new change moves the bookmark and the repository head', async (t) => {
    const before = await s.api('GET', f.base);
    t.equal(before.json.head_change_id, changeId);
    await s.api('GET', `${f.base}/bookmarks/main`);
    const next = await applyOps(f, { base_change_id: changeId, ops: [write('b.txt', 'b\n')], bookmarks: [{ name: 'main' }] });
    t.equal(next.status, 201, next.text);
    const newId = next.json.change.id as string;
    t.equal((await s.api('GET', f.base)).json.head_change_id, newId);
    t.equal((await s.api('GET', `${f.base}/bookmarks/main`)).json.change_id, newId);
    t.equal((await content('b.txt')).status, 200);
  });

  t.test('file metadata set after a cached read of the file', async (t) => {
    t.notOk((await content('a.txt')).json.metadata);
    const head = (await s.api('GET', f.base)).json.head_change_id as string;
    const set = await applyOps(f, { change_id: head, ops: [{ op: 'set_metadata', path: 'a.txt', metadata: { owner: 'ann' } }] });
    t.equal(set.status, 200, set.text);
    t.same((await content('a.txt')).json.metadata, { owner: 'ann' });
  });

  t.test('a diff, computed on the read pool, right after each of many writes shows the write', async (t) => {
    let parent = (await s.api('GET', f.base)).json.head_change_id as string;
    let stale = 0;
    for (let i = 0; i < 150; i++) {
      const next = await applyOps(f, { base_change_id: parent, ops: [write(`n/${i}.txt`, `${i}\n`)] });
      t.equal(next.status, 201, next.text);
      const id = next.json.change.id as string;
      const diff = await s.api('GET', `${f.base}/diff?base_change_id=${parent}&head_change_id=${id}`);
      if (diff.status !== 200 || !diff.text.includes(`n/${i}.txt`)) stale++;
      parent = id;
    }
    t.equal(stale, 0, 'no diff was computed on a snapshot older than the write');
  });

  t.test('rename and tags through the org, then delete', async (t) => {
    t.equal((await s.api('GET', `/${s.org}/fresh`)).status, 200);
    const renamed = await s.api('PATCH', `/${s.org}/fresh`, { body: { name: 'renamed', tags: { team: 'red' } } });
    t.equal(renamed.status, 200, renamed.text);
    t.equal((await s.api('GET', `/${s.org}/fresh`)).status, 404, 'the old name is gone at once');
    const now = await s.api('GET', `/${s.org}/renamed`);
    t.equal(now.status, 200);
    t.same(now.json.tags, { team: 'red' });
    const deleted = await s.api('DELETE', `/${s.org}/renamed`);
    t.ok(deleted.status === 200 || deleted.status === 204, deleted.text);
    t.equal((await s.api('GET', `/${s.org}/renamed`)).status, 404, 'a deleted repository is not served from memory');
    const recreated = await s.api('POST', `/${s.org}/repos`, { body: { name: 'renamed' } });
    t.equal(recreated.status, 201, recreated.text);
    const fresh = await s.api('GET', `/${s.org}/renamed`);
    t.equal(fresh.json.id, recreated.json.id, 'the new repository of that name, not the old one');
    t.equal(fresh.json.head_change_id, ROOT);
  });
});
