import t from 'tap';
import {
  EMPTY_TREE_OID,
  encodeCommit,
  encodeTree,
  formatSignature,
  hashObject,
  parseCommit,
  parseSignature,
  parseTree,
  readCommit,
  writeBlob,
  writeCommit,
  writeTree,
} from '../../src/vcs/git-object.js';
import type { CommitObject } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { exportToGit, fsckStrict, makeTree } from './vcs-helpers.js';

const sig = { name: 'Alice Example', email: 'alice@example.com', timestamp: 1767323045, tzOffsetMinutes: 120 };

t.test('git objects - ids are git ids', async (t) => {
  t.equal(hashObject('blob', new Uint8Array(0)), 'e69de29bb2d1d6434b8b29ae775ad8c2e48c5391');
  t.equal(hashObject('tree', new Uint8Array(0)), EMPTY_TREE_OID);
  t.equal(hashObject('blob', Buffer.from('hello\n')), 'ce013625030ba8dba906f756967f9e9ca394464a');
});

t.test('git objects - trees are sorted the git way, directories compared as name/', async (t) => {
  const store = new MemoryObjectStore();
  const blob = writeBlob(store, 'x');
  const sub = writeTree(store, [{ name: 'f', mode: '100644', oid: blob }]);
  const entries = [
    { name: 'a.b', mode: '100644' as const, oid: blob },
    { name: 'a', mode: '40000' as const, oid: sub },
    { name: 'a-', mode: '100755' as const, oid: blob },
    { name: 'B', mode: '120000' as const, oid: blob },
    { name: 'ä', mode: '100644' as const, oid: blob },
  ];
  const parsed = parseTree(encodeTree(entries));
  t.same(
    parsed.map((e) => e.name),
    ['B', 'a-', 'a.b', 'a', 'ä'],
  );
  t.same(parsed.find((e) => e.name === 'a'), { name: 'a', mode: '40000', oid: sub });
  t.throws(() => encodeTree([...entries, { name: 'a.b', mode: '100644', oid: blob }]), /duplicate/);
  t.throws(() => encodeTree([{ name: 'x/y', mode: '100644', oid: blob }]));
  const root = writeTree(store, entries);
  const repo = exportToGit(store, {});
  t.teardown(repo.cleanup);
  t.equal(repo.git('ls-tree', root).stdout.split('\n')[0], `120000 blob ${blob}\tB`);
});

t.test('git objects - a tree read back: old-style modes made canonical, malformed bytes refused', async (t) => {
  const oid = 'ab'.repeat(20);
  const entry = (mode: string, name: string): Buffer => Buffer.concat([Buffer.from(`${mode} ${name}\0`), Buffer.from(oid, 'hex')]);
  t.same(
    parseTree(Buffer.concat([entry('100664', 'a.txt'), entry('040000', 'd')])),
    [
      { mode: '100644', name: 'a.txt', oid },
      { mode: '40000', name: 'd', oid },
    ],
  );
  const malformed: Array<[string, Buffer]> = [
    ['no space after the mode', Buffer.from('100644')],
    ['no NUL after the name', Buffer.from('100644 a.txt')],
    ['an oid cut short', Buffer.concat([Buffer.from('100644 a.txt\0'), Buffer.alloc(19)])],
    ['a mode git does not write', entry('100600', 'a.txt')],
    ['no mode at all', entry('', 'a.txt')],
  ];
  for (const [what, bytes] of malformed) {
    t.throws(() => parseTree(bytes), /corrupt tree object|unsupported tree entry mode/, what);
  }
});

t.test('git objects - signatures format and parse with time zones', async (t) => {
  t.equal(formatSignature(sig), 'Alice Example <alice@example.com> 1767323045 +0200');
  t.equal(formatSignature({ ...sig, name: 'Ev<il>\nName', tzOffsetMinutes: -330 }), 'EvilName <alice@example.com> 1767323045 -0530');
  t.same(parseSignature('Alice Example <alice@example.com> 1767323045 +0200'), sig);
  t.same(parseSignature('A <> 0 -0130'), { name: 'A', email: '', timestamp: 0, tzOffsetMinutes: -90 });
});

t.test('git objects - commits round-trip with extra headers in order, multi-line values included', async (t) => {
  const commit: CommitObject = {
    tree: EMPTY_TREE_OID,
    parents: ['1'.repeat(40), '2'.repeat(40)],
    author: sig,
    committer: { ...sig, timestamp: sig.timestamp + 1 },
    extraHeaders: [
      { name: 'jj:trees', value: `${'a'.repeat(40)} ${'b'.repeat(40)} ${'c'.repeat(40)}` },
      { name: 'change-id', value: 'z'.repeat(31) + 'k' },
      { name: 'gpgsig', value: '-----BEGIN-----\nline\n-----END-----' },
    ],
    message: 'subject\n\nbody\n',
  };
  const bytes = encodeCommit(commit);
  t.match(Buffer.from(bytes).toString(), /committer .*\njj:trees a+ b+ c+\nchange-id z+k\ngpgsig -----BEGIN-----\n line\n -----END-----\n\nsubject/);
  t.same(parseCommit(bytes), commit);
});

t.test('git objects - a commit with a change-id header passes git fsck --strict and shows in cat-file', async (t) => {
  const store = new MemoryObjectStore();
  const tree = makeTree(store, { 'README.md': '# hi\n', 'src/a.ts': 'export {};\n', 'bin/run': { content: '#!/bin/sh\n', mode: '100755' }, link: { content: 'README.md', mode: '120000' } });
  const changeId = 'kkkkzzzzkkkkzzzzkkkkzzzzkkkkzzzz';
  const first = writeCommit(store, { tree, parents: [], author: sig, committer: sig, extraHeaders: [{ name: 'change-id', value: changeId }], message: 'first\n' });
  const empty = writeCommit(store, { tree, parents: [first], author: sig, committer: sig, extraHeaders: [{ name: 'change-id', value: changeId }], message: '' });
  const result = fsckStrict(store, { 'refs/heads/main': empty });
  t.ok(result.ok, result.output);
  const repo = exportToGit(store, { 'refs/heads/main': empty });
  t.teardown(repo.cleanup);
  const shown = repo.git('cat-file', '-p', first).stdout;
  t.match(shown, new RegExp(`\\nchange-id ${changeId}\\n`));
  t.same(readCommit(store, first).extraHeaders, [{ name: 'change-id', value: changeId }]);
});
