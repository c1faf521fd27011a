import t from 'tap';
import { ROOT, applyOps, exportRepo, startWithRepo, type RepoFixture } from '../changes/helpers.js';
import { b64, blobOid, writeOp } from './read-helpers.js';

const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
const JSON_LIMIT = 300_000;

const README = '# Hello\n';
const BINARY = Buffer.from([0, 1, 2, 3, 255, 254, 0, 10, 13, 0, 128]);
const SCRIPT = '#!/bin/sh\necho hi\n';
const UNICODE_PATH = 'ünï/cødé ✓.txt';
const MID = 'm'.repeat(279_999) + '\n'; // over the front end's 256 KiB: served by the read pool
const BIG = 'b'.repeat(400_000); // over the JSON limit

t.test('content', async (t) => {
  const f: RepoFixture = await startWithRepo(t, 'docs', { env: { REPOHOST_JSON_CONTENT_LIMIT: String(JSON_LIMIT) } });
  const created = await applyOps(f, {
    base_change_id: ROOT,
    ops: [
      writeOp('README.md', README),
      writeOp('empty.txt', ''),
      writeOp('bin/data.bin', BINARY),
      writeOp('scripts/run.sh', SCRIPT, '100755'),
      writeOp('link', 'README.md', '120000'),
      writeOp(UNICODE_PATH, 'unicode\n'),
      writeOp('deep/top.txt', 'top\n'),
      writeOp('deep/a/x.txt', 'x\n'),
      writeOp('deep/a/b/y.txt', 'y\n'),
      writeOp('deep/a/b/c/d.txt', 'd\n'),
      writeOp('mid.txt', MID),
      writeOp('big.txt', BIG),
      { op: 'set_metadata', path: 'README.md', metadata: { lang: 'en' } },
      { op: 'set_metadata', path: 'deep/top.txt', metadata: { owner: 'alice', tier: 'gold' } },
      { op: 'set_metadata', path: 'deep/a/x.txt', metadata: { owner: 'bob', tier: 'gold' } },
      { op: 'set_metadata', path: 'deep/a', metadata: { owner: 'alice' } },
    ],
    bookmarks: [{ name: 'main', create: true }],
  });
  t.equal(created.status, 201, created.text);
  const changeId = created.json.change.id as string;
  const get = (query: string, headers: Record<string, string> = {}) => f.s.api('GET', `${f.base}/content${query}`, { headers });
  const raw = async (query: string): Promise<{ status: number; headers: Headers; bytes: Buffer }> => {
    const res = await fetch(`${f.s.url}/v1${f.base}/content${query}`, { headers: { authorization: `Bearer ${await f.s.token()}`, accept: 'application/octet-stream' } });
    return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
  };
  const exported = exportRepo(f);
  t.teardown(() => exported.cleanup());
  const rootTree = exported.git('rev-parse', 'main^{tree}').stdout.trim();
  const treeOf = (path: string): string => exported.git('rev-parse', `main:${path}`).stdout.trim();

  t.test('a file as JSON carries every field; the default change is the default bookmark', async (t) => {
    const expected = {
      type: 'file',
      name: 'README.md',
      path: 'README.md',
      sha: blobOid(README),
      size: README.length,
      mode: '100644',
      encoding: 'base64',
      content: b64(README),
      is_conflicted: false,
      metadata: { lang: 'en' },
    };
    const res = await get('?path=README.md');
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^application\/json/);
    t.strictSame(res.json, expected);
    t.strictSame((await get(`?path=README.md&change_id=${changeId}`)).json, expected, 'explicit change_id reads the same');
    t.strictSame((await get('?path=/README.md', { accept: '*/*' })).json, expected, 'a leading "/" and Accept */* are fine');
  });

  t.test('empty, executable, binary, symlink and unicode-named files', async (t) => {
    t.strictSame((await get('?path=empty.txt')).json, {
      type: 'file', name: 'empty.txt', path: 'empty.txt', sha: blobOid(''), size: 0, mode: '100644', encoding: 'base64', content: '', is_conflicted: false,
    });
    const script = (await get('?path=scripts/run.sh')).json;
    t.equal(script.mode, '100755');
    t.equal(Buffer.from(script.content, 'base64').toString(), SCRIPT);
    const bin = (await get('?path=bin/data.bin')).json;
    t.equal(bin.type, 'file');
    t.equal(bin.size, BINARY.length);
    t.same(Buffer.from(bin.content, 'base64'), BINARY, 'binary bytes survive base64');
    t.strictSame((await get('?path=link')).json, {
      type: 'symlink', name: 'link', path: 'link', sha: blobOid('README.md'), size: 9, mode: '120000', encoding: 'base64', content: b64('README.md'), is_conflicted: false,
    });
    const uni = await get(`?path=${encodeURIComponent(UNICODE_PATH)}`);
    t.equal(uni.status, 200);
    t.equal(uni.json.path, UNICODE_PATH);
    t.equal(uni.json.name, 'cødé ✓.txt');
    t.equal(Buffer.from(uni.json.content, 'base64').toString(), 'unicode\n');
  });

  t.test('raw bytes with Accept: application/octet-stream, with the blob headers', async (t) => {
    const bin = await raw('?path=bin/data.bin');
    t.equal(bin.status, 200);
    t.equal(bin.headers.get('content-type'), 'application/octet-stream');
    t.equal(bin.headers.get('x-svc-blob-hash'), blobOid(BINARY));
    t.equal(bin.headers.get('x-svc-blob-size'), String(BINARY.length));
    t.same(bin.bytes, BINARY);
    // A repeated read (the front end keeps small raw files) has the same bytes and headers.
    const again = await raw('?path=bin/data.bin');
    t.same(again.bytes, BINARY, 'a repeated read has the same bytes');
    for (const name of ['content-type', 'x-svc-blob-hash', 'x-svc-blob-size']) t.equal(again.headers.get(name), bin.headers.get(name), `and the same ${name}`);
    const link = await raw('?path=link');
    t.equal(link.bytes.toString(), 'README.md', "a symlink's raw bytes are its target");
    t.equal(link.headers.get('x-svc-blob-hash'), blobOid('README.md'));
    const empty = await raw('?path=empty.txt');
    t.equal(empty.status, 200);
    t.equal(empty.bytes.length, 0);
    t.equal(empty.headers.get('x-svc-blob-size'), '0');
    const big = await raw('?path=big.txt');
    t.equal(big.bytes.toString(), BIG, 'a file over the JSON limit is served raw');
    const uni = await raw(`?path=${encodeURIComponent(UNICODE_PATH)}`);
    t.equal(uni.bytes.toString(), 'unicode\n');
    const preferred = await f.s.api('GET', `${f.base}/content?path=README.md`, { headers: { accept: 'application/json;q=0.5, application/octet-stream' } });
    t.equal(preferred.text, README, 'q-values choose octet-stream');
  });

  t.test('the root directory lists one level by default, with every field', async (t) => {
    const res = await get('');
    t.equal(res.status, 200);
    t.strictSame(res.json, {
      type: 'dir',
      name: '',
      path: '',
      sha: rootTree,
      child_count: 9,
      entries: [
        { type: 'file', name: 'README.md', path: 'README.md', sha: blobOid(README), size: README.length, mode: '100644', metadata: { lang: 'en' } },
        { type: 'file', name: 'big.txt', path: 'big.txt', sha: blobOid(BIG), size: BIG.length, mode: '100644' },
        { type: 'dir', name: 'bin', path: 'bin', sha: treeOf('bin') },
        { type: 'dir', name: 'deep', path: 'deep', sha: treeOf('deep') },
        { type: 'file', name: 'empty.txt', path: 'empty.txt', sha: blobOid(''), size: 0, mode: '100644' },
        { type: 'symlink', name: 'link', path: 'link', sha: blobOid('README.md'), size: 9, mode: '120000' },
        { type: 'file', name: 'mid.txt', path: 'mid.txt', sha: blobOid(MID), size: MID.length, mode: '100644' },
        { type: 'dir', name: 'scripts', path: 'scripts', sha: treeOf('scripts') },
        { type: 'dir', name: 'ünï', path: 'ünï', sha: treeOf('ünï') },
      ],
      truncated: false,
    });
  });

  t.test('depth 0, 1 and 3; deeper rows carry full paths', async (t) => {
    const zero = (await get('?path=deep&depth=0')).json;
    t.strictSame(zero, { type: 'dir', name: 'deep', path: 'deep', sha: treeOf('deep'), child_count: 2, entries: [], truncated: false });
    const one = (await get('?path=deep/')).json;
    t.same(one.entries.map((e: { path: string }) => e.path), ['deep/a', 'deep/top.txt']);
    t.strictSame(one.entries[0], { type: 'dir', name: 'a', path: 'deep/a', sha: treeOf('deep/a'), metadata: { owner: 'alice' } });
    const three = (await get('?path=deep&depth=3')).json;
    t.same(three.entries.map((e: { path: string }) => e.path), ['deep/a', 'deep/a/b', 'deep/a/b/c', 'deep/a/b/y.txt', 'deep/a/x.txt', 'deep/top.txt']);
    t.strictSame(three.entries[3], { type: 'file', name: 'y.txt', path: 'deep/a/b/y.txt', sha: blobOid('y\n'), size: 2, mode: '100644' });
    const ten = (await get('?depth=10')).json;
    t.ok(ten.entries.some((e: { path: string }) => e.path === 'deep/a/b/c/d.txt'));
    t.equal(ten.child_count, 9);
  });

  t.test('metadata filters: metadata[k]=v and bare keys, ANDed', async (t) => {
    const paths = async (query: string): Promise<string[]> => (await get(query)).json.entries.map((e: { path: string }) => e.path);
    t.same(await paths('?path=deep&depth=3&metadata[owner]=alice'), ['deep/a', 'deep/top.txt']);
    t.same(await paths('?path=deep&depth=3&metadata%5Bowner%5D=alice'), ['deep/a', 'deep/top.txt'], 'percent-encoded brackets');
    t.same(await paths('?path=deep&depth=3&owner=alice'), ['deep/a', 'deep/top.txt'], 'a bare key is a metadata filter');
    t.same(await paths('?path=deep&depth=3&metadata[tier]=gold'), ['deep/a/x.txt', 'deep/top.txt']);
    t.same(await paths('?path=deep&depth=3&metadata[owner]=alice&tier=gold'), ['deep/top.txt'], 'filters are ANDed');
    t.same(await paths('?path=deep&depth=3&metadata[owner]=carol'), []);
    const top = (await get('?path=deep&depth=1&owner=alice')).json;
    t.equal(top.child_count, 2, 'child_count counts every child, filtered or not');
    t.same(top.metadata, undefined);
    t.same((await get('?path=deep/a&depth=0')).json.metadata, { owner: 'alice' }, "a directory's own metadata");
  });

  t.test('large files: JSON from the read pool up to the limit, 406 past it', async (t) => {
    const mid = await get('?path=mid.txt');
    t.equal(mid.status, 200);
    t.equal(mid.json.size, MID.length);
    t.equal(Buffer.from(mid.json.content, 'base64').toString(), MID);
    t.equal(mid.json.sha, blobOid(MID));
    const big = await get('?path=big.txt');
    t.equal(big.status, 406);
    t.equal(big.json.error.code, 'NOT_ACCEPTABLE');
    t.match(big.json.error.message, /application\/octet-stream/);
  });

  t.test('the virtual root and an empty repository read as an empty tree', async (t) => {
    t.strictSame((await get(`?change_id=${ROOT}`)).json, { type: 'dir', name: '', path: '', sha: EMPTY_TREE, child_count: 0, entries: [], truncated: false });
    t.equal((await f.s.api('POST', `/${f.s.org}/repos`, { body: { name: 'blank' } })).status, 201);
    const blank = await f.s.api('GET', `/${f.s.org}/blank/content`);
    t.strictSame(blank.json, { type: 'dir', name: '', path: '', sha: EMPTY_TREE, child_count: 0, entries: [], truncated: false });
  });

  t.test('errors: 404, 406 and 400 with their codes', async (t) => {
    const cases: Array<[string, Record<string, string>, number, string]> = [
      ['?path=nope.txt', {}, 404, 'FILE_NOT_FOUND'],
      ['?path=README.md/below', {}, 404, 'FILE_NOT_FOUND'],
      [`?change_id=${'k'.repeat(32)}`, {}, 404, 'CHANGE_NOT_FOUND'],
      ['?change_id=abc', {}, 400, 'INVALID_REQUEST'],
      ['?path=deep', { accept: 'application/octet-stream' }, 406, 'NOT_ACCEPTABLE'],
      ['?path=README.md', { accept: 'text/html' }, 406, 'NOT_ACCEPTABLE'],
      ['?path=README.md', { accept: 'application/json;q=0, application/octet-stream;q=0' }, 406, 'NOT_ACCEPTABLE'],
      ['?depth=11', {}, 400, 'INVALID_REQUEST'],
      ['?depth=-1', {}, 400, 'INVALID_REQUEST'],
      ['?depth=x', {}, 400, 'INVALID_REQUEST'],
      ['?path=a/../README.md', {}, 400, 'INVALID_REQUEST'],
      ['?path=a&path=b', {}, 400, 'INVALID_REQUEST'],
    ];
    for (const [query, headers, status, code] of cases) {
      const res = await get(query, headers);
      t.equal(res.status, status, `${query} ${JSON.stringify(headers)}`);
      t.equal(res.json?.error?.code, code, `${query} → ${code}`);
    }
    const missingRepo = await f.s.api('GET', `/${f.s.org}/nope/content`);
    t.equal(missingRepo.json.error.code, 'REPO_NOT_FOUND');
  });

  t.test('a conflicted change reads as its materialized view: markers, layout hidden', async (t) => {
    const lines = (edit?: string): string => Array.from({ length: 6 }, (_, i) => `${i === 3 && edit ? edit : `line ${i}`}\n--\n`).join('');
    const parent = await applyOps(f, { base_change_id: changeId, ops: [writeOp('lines.txt', lines())] });
    const child = await applyOps(f, { base_change_id: parent.json.change.id, ops: [writeOp('lines.txt', lines('child edit')), writeOp('child.txt', 'c\n')] });
    const evolved = await applyOps(f, { change_id: parent.json.change.id, ops: [writeOp('lines.txt', lines('parent edit'))] });
    t.equal(evolved.status, 200, evolved.text);
    const conflicted = child.json.change.id as string;
    t.equal((await f.s.api('GET', `${f.base}/changes/${conflicted}`)).json.is_conflicted, true, 'the child is conflicted');

    const fileRes = await get(`?change_id=${conflicted}&path=lines.txt`);
    t.equal(fileRes.status, 200, fileRes.text);
    const file = fileRes.json;
    const text = Buffer.from(file.content, 'base64').toString();
    t.equal(file.is_conflicted, true);
    t.match(text, /<<<<<<< target\n[^]*parent edit[^]*\|\|\|\|\|\|\| base\n[^]*line 3[^]*=======\n[^]*child edit[^]*>>>>>>> source\n/);
    t.equal(file.sha, blobOid(text), 'sha is the materialized blob');
    t.equal(file.size, Buffer.byteLength(text));
    const bytes = await raw(`?change_id=${conflicted}&path=lines.txt`);
    t.equal(bytes.bytes.toString(), text, 'raw bytes are the materialized text');
    t.equal(bytes.headers.get('x-svc-blob-hash'), file.sha);
    t.equal((await get(`?change_id=${conflicted}&path=child.txt`)).json.is_conflicted, false);

    const listing = (await get(`?change_id=${conflicted}&depth=10`)).json;
    const paths = listing.entries.map((e: { path: string }) => e.path) as string[];
    t.ok(paths.includes('lines.txt') && paths.includes('child.txt'));
    t.notOk(paths.some((p) => p.startsWith('.jjconflict') || p === 'JJ-CONFLICT-README'), 'the jj layout is hidden');
    t.equal(listing.child_count, (await get(`?change_id=${parent.json.change.id}`)).json.child_count + 1, 'child_count counts the view, not the layout');
    t.equal((await get(`?change_id=${conflicted}&path=JJ-CONFLICT-README`)).status, 404);
  });

  t.test('permission: git:read is needed, repo:read is not enough', async (t) => {
    const metaOnly = await f.s.token({ scopes: ['repo:read'] });
    t.equal((await f.s.api('GET', `${f.base}/content?path=README.md`, { token: metaOnly })).status, 403);
    const reader = await f.s.token({ scopes: ['git:read'] });
    t.equal((await f.s.api('GET', `${f.base}/content?path=README.md`, { token: reader })).status, 200);
  });

  t.test('a listing shows metadata alike whether it scans the subtree\'s records or looks each entry up', async (t) => {
    // 300 records under many/: more than a one-level listing of the root scans (256 or twice its entries).
    const ops = [];
    for (let i = 0; i < 300; i++) ops.push(writeOp(`many/f-${i}.txt`, `${i}\n`), { op: 'set_metadata', path: `many/f-${i}.txt`, metadata: { n: String(i) } });
    const made = await applyOps(f, { base_change_id: changeId, ops });
    t.equal(made.status, 201, made.text);
    const at = made.json.change.id as string;
    const root = (await get(`?change_id=${at}&depth=1`)).json;
    const row = (path: string) => root.entries.find((e: { path: string }) => e.path === path);
    t.same(row('README.md').metadata, { lang: 'en' }, 'looked up');
    t.same(row('deep').metadata, undefined);
    const many = (await get(`?change_id=${at}&path=many&depth=1`)).json;
    t.equal(many.entries.length, 300);
    t.ok(many.entries.every((e: { path: string; metadata?: { n: string } }) => e.metadata?.n === e.path.slice('many/f-'.length, -'.txt'.length)), 'scanned');
  });
});
