import t from 'tap';
import { ROOT, applyOps, exportRepo, startWithRepo, type RepoFixture } from '../changes/helpers.js';
import { applyPatchToCommit, writeOp } from './read-helpers.js';

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d]), Buffer.alloc(200, 7)]);
const PNG2 = Buffer.concat([PNG.subarray(0, 100), Buffer.alloc(50, 9)]);

t.test('diff', async (t) => {
  const f: RepoFixture = await startWithRepo(t, 'code');
  const ids = async (body: Record<string, unknown>): Promise<string> => {
    const res = await applyOps(f, body);
    if (res.status >= 300) throw new Error(res.text);
    return res.json.change.id as string;
  };
  const diff = (base: string, head: string, extra = '', headers: Record<string, string> = {}) =>
    f.s.api('GET', `${f.base}/diff?base_change_id=${base}&head_change_id=${head}${extra}`, { headers });

  const base = await ids({
    base_change_id: ROOT,
    ops: [
      writeOp('keep.txt', 'same\n'),
      writeOp('mod.txt', 'a\nb\nc\n'),
      writeOp('del.txt', 'bye\n'),
      writeOp('old/name.txt', 'moving\n'),
      writeOp('mode.sh', '#!/bin/sh\n'),
      writeOp('img.bin', PNG),
      writeOp('link', 'keep.txt', '120000'),
    ],
    bookmarks: [{ name: 'main', create: true }],
  });
  const head = await ids({
    base_change_id: base,
    ops: [
      writeOp('mod.txt', 'a\nB\nc\nd\n'),
      { op: 'delete', path: 'del.txt' },
      { op: 'rename', from: 'old/name.txt', to: 'new/name.txt' },
      writeOp('mode.sh', '#!/bin/sh\n', '100755'),
      writeOp('img.bin', PNG2),
      writeOp('link', 'mod.txt', '120000'),
      writeOp('new.txt', 'n1\nn2\n'),
      writeOp('ü.txt', 'ü\n'),
    ],
  });

  t.test('JSON: every field of every kind of entry', async (t) => {
    const res = await diff(base, head);
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^application\/json/);
    const entry = (path: string, status: string, size: number, hunks: unknown, extra: Record<string, unknown> = {}) => ({
      path, status, old_path: null, size_bytes: size, is_conflicted: false, omitted_reason: null, hunks, ...extra,
    });
    t.strictSame(res.json, {
      base_change_id: base,
      head_change_id: head,
      stats: { entries: 8, additions: 6, deletions: 3, changes: 9, conflicted_entries: 0, conflicted_hunks: 0 },
      truncated: false,
      entries: [
        entry('del.txt', 'deleted', 4, [{ old_start: 1, old_lines: 1, new_start: 0, new_lines: 0, lines: [{ kind: 'deleted', text: 'bye' }] }]),
        entry('img.bin', 'modified', PNG2.length, null, { omitted_reason: 'binary' }),
        entry('link', 'modified', 7, [{ old_start: 1, old_lines: 1, new_start: 1, new_lines: 1, lines: [{ kind: 'deleted', text: 'keep.txt' }, { kind: 'added', text: 'mod.txt' }] }]),
        entry('mod.txt', 'modified', 8, [
          {
            old_start: 1,
            old_lines: 3,
            new_start: 1,
            new_lines: 4,
            lines: [
              { kind: 'context', text: 'a' },
              { kind: 'deleted', text: 'b' },
              { kind: 'added', text: 'B' },
              { kind: 'context', text: 'c' },
              { kind: 'added', text: 'd' },
            ],
          },
        ]),
        entry('mode.sh', 'modified', 10, []),
        entry('new.txt', 'added', 6, [{ old_start: 0, old_lines: 0, new_start: 1, new_lines: 2, lines: [{ kind: 'added', text: 'n1' }, { kind: 'added', text: 'n2' }] }]),
        entry('new/name.txt', 'renamed', 7, [], { old_path: 'old/name.txt' }),
        entry('ü.txt', 'added', 3, [{ old_start: 0, old_lines: 0, new_start: 1, new_lines: 1, lines: [{ kind: 'added', text: 'ü' }] }]),
      ],
      conflicted_entries: [],
    });
  });

  t.test('the virtual root is allowed on both sides; a change against itself is empty', async (t) => {
    const same = await diff(head, head);
    t.strictSame(same.json.stats, { entries: 0, additions: 0, deletions: 0, changes: 0, conflicted_entries: 0, conflicted_hunks: 0 });
    t.strictSame(same.json.entries, []);
    const fromRoot = await diff(ROOT, base);
    t.equal(fromRoot.json.stats.entries, 7);
    t.ok(fromRoot.json.entries.every((e: { status: string }) => e.status === 'added'));
    const toRoot = await diff(base, ROOT);
    t.ok(toRoot.json.entries.every((e: { status: string }) => e.status === 'deleted'));
    t.equal((await diff(ROOT, ROOT)).json.stats.entries, 0);
  });

  t.test('text/plain: a git patch that git apply turns into the head tree; statuses agree with git', async (t) => {
    const text = await diff(base, head, '', { accept: 'text/plain' });
    t.equal(text.status, 200);
    t.match(text.headers.get('content-type'), /^text\/plain/);
    t.match(text.text, 'diff --git a/old/name.txt b/new/name.txt\nsimilarity index 100%\nrename from old/name.txt\nrename to new/name.txt\n');
    t.match(text.text, 'diff --git a/mode.sh b/mode.sh\nold mode 100644\nnew mode 100755\n');
    t.match(text.text, /diff --git a\/img\.bin b\/img\.bin\nindex [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT binary patch\nliteral 150\n/);
    const exported = exportRepo(f);
    t.teardown(() => exported.cleanup());
    const commitOf = async (id: string): Promise<string> => (await f.s.api('GET', `${f.base}/changes/${id}`)).json.current_commit_oid;
    const [baseCommit, headCommit] = [await commitOf(base), await commitOf(head)];
    const applied = applyPatchToCommit(exported, baseCommit, Buffer.from(text.text, 'utf8'));
    t.equal(applied.check, '');
    t.equal(applied.tree, exported.git('rev-parse', `${headCommit}^{tree}`).stdout.trim());
    const gitStatus = exported.git('-c', 'core.quotepath=false', 'diff', '--name-status', '-M100%', baseCommit, headCommit).stdout.trim().split('\n');
    const ours = (await diff(base, head)).json.entries.map((e: { path: string; status: string; old_path: string | null }) =>
      e.status === 'renamed' ? `R100\t${e.old_path}\t${e.path}` : `${e.status[0]!.toUpperCase()}\t${e.path}`,
    );
    t.same(ours.sort(), gitStatus.sort(), 'the same paths and statuses as git diff -M');
  });

  t.test('text/plain: a 50-file change applies with git apply to the base checkout and yields the head tree', async (t) => {
    const text = (i: number, edit = ''): string => Array.from({ length: 30 }, (_, k) => (k === i % 30 && edit ? `${edit}\n` : `file ${i} line ${k}\n`)).join('');
    const binary = (seed: number, size = 3000): Buffer => Buffer.from(Array.from({ length: size }, (_, k) => (k * seed + (k >> 3)) % 251 === 7 ? 0 : (k * seed) % 256));
    const before = await ids({
      base_change_id: ROOT,
      ops: [
        ...Array.from({ length: 15 }, (_, i) => writeOp(`src/mod-${i}.txt`, text(i))),
        ...Array.from({ length: 8 }, (_, i) => writeOp(`old/gone-${i}.txt`, text(100 + i))),
        writeOp('old/gone.bin', binary(3)),
        writeOp('old/gone-link', 'src/mod-1.txt', '120000'),
        writeOp('move/me.txt', text(200)),
        writeOp('move/deep.txt', text(201)),
        ...Array.from({ length: 3 }, (_, i) => writeOp(`bin/mode-${i}.sh`, `echo ${i}\n`)),
        writeOp('assets/a.bin', binary(5)),
        writeOp('assets/b.bin', binary(7)),
        writeOp('becomes-link', 'plain file\n'),
        writeOp('becomes-dir', 'a file, then a directory\n'),
        writeOp('crlf.txt', 'one\r\ntwo\r\nthree\r\n'),
        writeOp('no-eol.txt', 'last line without newline'),
      ],
    });
    const after = await ids({
      base_change_id: before,
      ops: [
        ...Array.from({ length: 13 }, (_, i) => writeOp(`src/mod-${i}.txt`, text(i, `edited ${i}`))),
        writeOp('crlf.txt', 'one\r\nTWO\r\nthree\r\n'),
        writeOp('no-eol.txt', 'last line changed, still without newline'),
        ...Array.from({ length: 8 }, (_, i) => ({ op: 'delete', path: `old/gone-${i}.txt` })),
        { op: 'delete', path: 'old/gone.bin' },
        { op: 'delete', path: 'old/gone-link' },
        { op: 'rename', from: 'move/me.txt', to: 'moved/me.txt' },
        { op: 'rename', from: 'move/deep.txt', to: 'moved/very/deep/file name.txt' },
        writeOp('bin/mode-0.sh', 'echo 0\n', '100755'),
        writeOp('bin/mode-1.sh', 'echo 1\n', '100755'),
        writeOp('bin/mode-2.sh', 'echo two\n', '100755'),
        writeOp('assets/a.bin', binary(11)),
        writeOp('assets/b.bin', Buffer.concat([binary(7).subarray(0, 1000), binary(13, 500)])),
        writeOp('becomes-link', 'src/mod-2.txt', '120000'),
        { op: 'delete', path: 'becomes-dir' },
        writeOp('becomes-dir/inside.txt', 'now inside a directory\n'),
        ...Array.from({ length: 9 }, (_, i) => writeOp(`new/added-${i}.txt`, text(300 + i))),
        writeOp('new/empty.txt', ''),
        writeOp('new/run.sh', '#!/bin/sh\nexit 0\n', '100755'),
        writeOp('new/link', '../src/mod-3.txt', '120000'),
        writeOp('new/pic.bin', binary(17, 20_000)),
        writeOp('new/ünïcødé name.txt', 'ü\n'),
        writeOp('new/small.bin', Buffer.from([0, 1, 2])),
      ],
    });
    const json = (await diff(before, after)).json;
    t.equal(json.stats.entries, 50, 'every changed path is an entry');
    const patch = await f.s.api('GET', `${f.base}/diff?base_change_id=${before}&head_change_id=${after}`, { headers: { accept: 'text/plain' } });
    const raw = Buffer.from(patch.text, 'utf8');
    const exported = exportRepo(f);
    t.teardown(() => exported.cleanup());
    const commitOf = async (id: string): Promise<string> => (await f.s.api('GET', `${f.base}/changes/${id}`)).json.current_commit_oid;
    const [baseCommit, headCommit] = [await commitOf(before), await commitOf(after)];
    const applied = applyPatchToCommit(exported, baseCommit, raw);
    t.equal(applied.check, '', 'git apply --check accepts the patch');
    t.equal(applied.tree, exported.git('rev-parse', `${headCommit}^{tree}`).stdout.trim(), 'the applied tree is the head tree, byte for byte');
    const gitStatus = exported.git('-c', 'core.quotepath=false', 'diff', '--name-status', '-M100%', baseCommit, headCommit).stdout.trim().split('\n');
    const ours = json.entries.map((e: { path: string; status: string; old_path: string | null }) =>
      e.status === 'renamed' ? `R100\t${e.old_path}\t${e.path}` : `${e.status[0]!.toUpperCase()}\t${e.path}`,
    );
    t.same(ours.sort(), gitStatus.map((line) => line.replace(/^T\t/, 'M\t')).sort(), 'the same paths and statuses as git (a type change is "modified")');
  });

  t.test('errors: 400, 404 and 406 with their codes; repo:read is not enough', async (t) => {
    const cases: Array<[string, Record<string, string>, number, string]> = [
      [`?head_change_id=${head}`, {}, 400, 'INVALID_REQUEST'],
      [`?base_change_id=${base}`, {}, 400, 'INVALID_REQUEST'],
      [`?base_change_id=${base}&head_change_id=${head}&conflicts=some`, {}, 400, 'INVALID_REQUEST'],
      [`?base_change_id=${base}&head_change_id=${head}&path=x`, {}, 400, 'INVALID_REQUEST'],
      [`?base_change_id=nope&head_change_id=${head}`, {}, 400, 'INVALID_REQUEST'],
      [`?base_change_id=${'k'.repeat(32)}&head_change_id=${head}`, {}, 404, 'CHANGE_NOT_FOUND'],
      [`?base_change_id=${base}&head_change_id=${'l'.repeat(32)}`, {}, 404, 'CHANGE_NOT_FOUND'],
      [`?base_change_id=${base}&head_change_id=${head}`, { accept: 'application/octet-stream' }, 406, 'NOT_ACCEPTABLE'],
      [`?base_change_id=${base}&head_change_id=${head}`, { accept: 'text/plain;q=0, application/json;q=0' }, 406, 'NOT_ACCEPTABLE'],
    ];
    for (const [query, headers, status, code] of cases) {
      const res = await f.s.api('GET', `${f.base}/diff${query}`, { headers });
      t.equal(res.status, status, query);
      t.equal(res.json?.error?.code, code, `${query} → ${code}`);
    }
    const metaOnly = await f.s.token({ scopes: ['repo:read'] });
    t.equal((await f.s.api('GET', `${f.base}/diff?base_change_id=${base}&head_change_id=${head}`, { token: metaOnly })).status, 403);
  });

  t.test('too_large and binary: big sides are judged without a full read', async (t) => {
    const bigText = Array.from({ length: 12_000 }, (_, i) => `${String(i).padStart(99, '.')}\n`).join(''); // 1.2 MB of added lines
    const hugeBinary = Buffer.alloc(9 * 1024 * 1024, 1);
    hugeBinary[10] = 0;
    const upload = async (bytes: Buffer): Promise<string> => {
      const res = await f.s.api('POST', `${f.base}/blobs`, { raw: bytes, headers: { 'content-type': 'application/octet-stream' } });
      t.equal(res.status, 201, res.text);
      return res.json.oid;
    };
    const binOid = await upload(hugeBinary);
    const textOid = await upload(Buffer.alloc(9 * 1024 * 1024, 0x61));
    const big = await ids({
      base_change_id: head,
      ops: [writeOp('big.txt', bigText), { op: 'write', path: 'huge.bin', blob_oid: binOid }, { op: 'write', path: 'huge.txt', blob_oid: textOid }],
    });
    const res = (await diff(head, big)).json;
    const byPath = Object.fromEntries(res.entries.map((e: { path: string }) => [e.path, e]));
    t.match(byPath['big.txt'], { status: 'added', omitted_reason: 'too_large', hunks: null, size_bytes: bigText.length });
    t.match(byPath['huge.bin'], { omitted_reason: 'binary', hunks: null, size_bytes: hugeBinary.length });
    t.match(byPath['huge.txt'], { omitted_reason: 'too_large', hunks: null });
    t.equal(res.stats.additions, 12_000, 'a too_large entry still counts its lines');
  });

  t.test('conflicts: include, only and exclude; conflict hunks as MERGE_CONFLICT reports them', async (t) => {
    const lines = (edit?: string): string => Array.from({ length: 6 }, (_, i) => `${i === 3 && edit ? edit : `line ${i}`}\n--\n`).join('');
    const parent = await ids({ base_change_id: base, ops: [writeOp('lines.txt', lines())] });
    const child = await ids({ base_change_id: parent, ops: [writeOp('lines.txt', lines('child edit')), writeOp('child.txt', 'c\n')] });
    await ids({ change_id: parent, ops: [writeOp('lines.txt', lines('parent edit'))] });
    const refused = await f.s.api('PATCH', `${f.base}/changes/${child}`, { body: { message: 'x' } });
    t.equal(refused.json.error.code, 'MERGE_CONFLICT');
    const expectedHunks = refused.json.error.details.conflicts[0].hunks;

    const include = (await diff(parent, child)).json;
    t.strictSame(include.stats, { entries: 1, additions: 1, deletions: 0, changes: 1, conflicted_entries: 1, conflicted_hunks: 1 });
    t.same(include.entries.map((e: { path: string }) => e.path), ['child.txt']);
    t.equal(include.conflicted_entries.length, 1);
    const conflicted = include.conflicted_entries[0];
    t.strictSame(Object.keys(conflicted).sort(), ['hunks', 'omitted_reason', 'path', 'size_bytes']);
    t.equal(conflicted.path, 'lines.txt');
    t.equal(conflicted.omitted_reason, null);
    t.strictSame(conflicted.hunks, expectedHunks);
    t.equal(Buffer.from(conflicted.hunks[0].source.content, 'base64').toString(), 'child edit\n');
    const materialized = (await f.s.api('GET', `${f.base}/content?change_id=${child}&path=lines.txt`)).json;
    t.equal(conflicted.size_bytes, materialized.size, 'size_bytes is the materialized file');

    const only = (await diff(parent, child, '&conflicts=only')).json;
    t.strictSame(only.entries, []);
    t.equal(only.stats.entries, 0);
    t.strictSame(only.conflicted_entries, include.conflicted_entries);
    const exclude = (await diff(parent, child, '&conflicts=exclude')).json;
    t.strictSame(exclude.conflicted_entries, []);
    t.equal(exclude.stats.conflicted_entries, 0);
    t.same(exclude.entries.map((e: { path: string }) => e.path), ['child.txt']);

    const same = (await diff(child, child)).json;
    t.equal(same.stats.entries + same.stats.conflicted_entries, 0, 'a conflict the base already has is not a change');
    const back = (await diff(child, parent)).json;
    t.same(back.entries.map((e: { path: string; status: string }) => `${e.status} ${e.path}`), ['deleted child.txt', 'modified lines.txt'], 'a conflicted base reads as its materialized view');
    t.strictSame(back.conflicted_entries, []);

    const patch = (await diff(parent, child, '', { accept: 'text/plain' })).text;
    t.match(patch, /diff --git a\/lines\.txt b\/lines\.txt\n[^]*\+<<<<<<< target\n/, 'conflicted files appear as their materialized text');
    t.notMatch((await diff(parent, child, '&conflicts=exclude', { accept: 'text/plain' })).text, 'lines.txt');
    t.notMatch((await diff(parent, child, '&conflicts=only', { accept: 'text/plain' })).text, 'child.txt');
  });
});
