import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { EMPTY_TREE_OID, readTree, writeBlob } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { applyTreeEdits, listFiles, lookupPath, walkTree } from '../../src/vcs/tree-edit.js';
import { diffTrees } from '../../src/vcs/tree-diff.js';
import { makeTree, readText } from './vcs-helpers.js';

function errorOf(fn: () => unknown): VcsError {
  try {
    fn();
  } catch (err) {
    if (err instanceof VcsError) return err;
    throw err;
  }
  throw new Error('expected a VcsError');
}

t.test('tree edits - a nested write creates parent directories and keeps siblings', async (t) => {
  const store = new MemoryObjectStore();
  const root = makeTree(store, { 'a.txt': 'a\n', 'src/keep.ts': 'keep\n' });
  const blob = writeBlob(store, 'deep\n');
  const next = applyTreeEdits(store, root, [{ op: 'write', path: 'src/x/y/z.ts', blobOid: blob, mode: '100755' }]);
  t.same(
    listFiles(store, next).map((f) => [f.path, f.mode]),
    [['a.txt', '100644'], ['src/keep.ts', '100644'], ['src/x/y/z.ts', '100755']],
  );
  t.same(lookupPath(store, next, 'src/x/y/z.ts'), { mode: '100755', oid: blob });
  t.equal(lookupPath(store, next, 'src/x')?.mode, '40000');
  t.equal(lookupPath(store, next, '')?.oid, next);
  t.equal(lookupPath(store, next, 'a.txt/b'), undefined);
  t.equal(lookupPath(store, next, 'nope'), undefined);
  // Replacing a file keeps the path and the old tree is untouched.
  const replaced = applyTreeEdits(store, next, [{ op: 'write', path: 'a.txt', blobOid: blob, mode: '100644' }]);
  t.equal(readText(store, replaced, 'a.txt'), 'deep\n');
  t.equal(readText(store, root, 'a.txt'), 'a\n');
});

t.test('tree edits - deleting a directory removes its subtree and empty parents disappear', async (t) => {
  const store = new MemoryObjectStore();
  const root = makeTree(store, { 'a/b/c.txt': 'c', 'a/b/d.txt': 'd', 'a/e.txt': 'e', 'f.txt': 'f' });
  const noB = applyTreeEdits(store, root, [{ op: 'delete', path: 'a/b' }]);
  t.same(listFiles(store, noB).map((f) => f.path), ['a/e.txt', 'f.txt']);
  const noA = applyTreeEdits(store, noB, [{ op: 'delete', path: 'a/e.txt' }]);
  t.same(readTree(store, noA).map((e) => e.name), ['f.txt'], 'a/ vanished with its last file');
  const empty = applyTreeEdits(store, noA, [{ op: 'delete', path: 'f.txt' }]);
  t.equal(empty, EMPTY_TREE_OID);
  t.ok(store.has(EMPTY_TREE_OID));
});

t.test('tree edits - rename moves files and directories, edits apply in order', async (t) => {
  const store = new MemoryObjectStore();
  const root = makeTree(store, { 'old/a.txt': 'a', 'old/sub/b.txt': 'b', 'x.txt': 'x', 'y.txt': 'y' });
  const next = applyTreeEdits(store, root, [
    { op: 'rename', from: 'old', to: 'new/place' },
    { op: 'rename', from: 'x.txt', to: 'y.txt' },
    { op: 'rename', from: 'y.txt', to: 'new/place/sub/y.txt' },
    { op: 'rename', from: 'new/place/a.txt', to: 'new/place/a.txt' },
  ]);
  t.same(listFiles(store, next).map((f) => f.path), ['new/place/a.txt', 'new/place/sub/b.txt', 'new/place/sub/y.txt']);
  t.equal(readText(store, next, 'new/place/sub/y.txt'), 'x', 'the renamed x.txt replaced y.txt');
  t.same(
    diffTrees(store, root, next).map((c) => [c.path, c.status]),
    [
      ['new/place/a.txt', 'added'],
      ['new/place/sub/b.txt', 'added'],
      ['new/place/sub/y.txt', 'added'],
      ['old/a.txt', 'deleted'],
      ['old/sub/b.txt', 'deleted'],
      ['x.txt', 'deleted'],
      ['y.txt', 'deleted'],
    ],
  );
});

t.test('tree edits - missing paths are missing-path and impossible writes invalid-edit or invalid-path, with the op index', async (t) => {
  const store = new MemoryObjectStore();
  const root = makeTree(store, { 'file.txt': 'f', 'dir/a.txt': 'a' });
  const blob = writeBlob(store, 'x');
  const cases: Array<[Parameters<typeof applyTreeEdits>[2], VcsError['kind'], number]> = [
    [[{ op: 'delete', path: 'missing.txt' }], 'missing-path', 0],
    [[{ op: 'write', path: 'ok.txt', blobOid: blob, mode: '100644' }, { op: 'delete', path: 'file.txt/x' }], 'missing-path', 1],
    [[{ op: 'rename', from: 'nope', to: 'x' }], 'missing-path', 0],
    [[{ op: 'write', path: 'file.txt/inside', blobOid: blob, mode: '100644' }], 'invalid-edit', 0],
    [[{ op: 'write', path: 'dir', blobOid: blob, mode: '100644' }], 'invalid-edit', 0],
    [[{ op: 'rename', from: 'dir', to: 'dir/deeper' }], 'invalid-edit', 0],
    [[{ op: 'write', path: '../escape', blobOid: blob, mode: '100644' }], 'invalid-path', 0],
    [[{ op: 'write', path: 'sub/.gitmodules', blobOid: blob, mode: '120000' }], 'invalid-edit', 0],
  ];
  for (const [edits, kind, index] of cases) {
    const err = errorOf(() => applyTreeEdits(store, root, edits));
    t.equal(err.kind, kind, err.message);
    t.equal(err.details?.op_index, index);
  }
  const deleted = applyTreeEdits(store, root, [{ op: 'delete', path: 'file.txt' }, { op: 'write', path: 'file.txt/now-a-dir', blobOid: blob, mode: '100644' }]);
  t.equal(lookupPath(store, deleted, 'file.txt')?.mode, '40000', 'delete then write turns a file into a directory');
});

t.test('tree edits - touching 3 files in a 10,000-file repository rewrites only the trees on their paths', async (t) => {
  const store = new MemoryObjectStore();
  const files: Record<string, string> = {};
  for (let i = 0; i < 10_000; i++) files[`d${i % 20}/e${i % 7}/f${i}.txt`] = `${i}\n`;
  const root = makeTree(store, files);
  const before = store.objectCount;
  const blob = writeBlob(store, 'changed\n');
  const next = applyTreeEdits(store, root, [
    { op: 'write', path: 'd1/e1/f1.txt', blobOid: blob, mode: '100644' },
    { op: 'write', path: 'd2/e2/f2.txt', blobOid: blob, mode: '100644' },
    { op: 'delete', path: 'd3/e3/f3.txt' },
  ]);
  const written = store.objectCount - before - 1;
  t.ok(written <= 7, `wrote ${written} trees (root + 2 per path)`);
  t.same(diffTrees(store, root, next).map((c) => c.path), ['d1/e1/f1.txt', 'd2/e2/f2.txt', 'd3/e3/f3.txt']);
  t.equal([...walkTree(store, next, { maxDepth: 1 })].length, 20);
});
