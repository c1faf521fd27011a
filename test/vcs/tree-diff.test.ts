import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { EMPTY_TREE_OID, parseTree, writeBlob } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { diffTrees, diffTreesWithin } from '../../src/vcs/tree-diff.js';
import { makeTree } from './vcs-helpers.js';

// Which files differ between two trees: the entries of a directory are walked in git's order on
// both sides at once, so names that sort differently as a file and as a directory, modes written
// the old way and large directories are where it could go wrong.
const summary = (store: MemoryObjectStore, a: string, b: string): string[] => diffTrees(store, a, b).map((c) => `${c.status} ${c.path}`);

/** A tree whose entries are given as stored: `[mode, name, oid]` in this order, unchecked. */
function rawTree(store: MemoryObjectStore, entries: Array<[string, string, string]>): string {
  return store.write('tree', Buffer.concat(entries.flatMap(([mode, name, oid]) => [Buffer.from(`${mode} ${name}\0`), Buffer.from(oid, 'hex')])));
}

t.test('tree diff - files added, deleted and changed, at every depth, in path order', async (t) => {
  const store = new MemoryObjectStore();
  const before = makeTree(store, { 'a.txt': 'a', 'd/x.txt': 'x', 'd/e/y.txt': 'y', 'z.txt': 'z' });
  const after = makeTree(store, { 'a.txt': 'A', 'd/e/y.txt': 'y', 'd/e/w.txt': 'w', 'z.txt': { content: 'z', mode: '100755' } });
  t.same(summary(store, before, after), ['modified a.txt', 'added d/e/w.txt', 'deleted d/x.txt', 'modified z.txt']);
  t.same(summary(store, after, before), ['modified a.txt', 'deleted d/e/w.txt', 'added d/x.txt', 'modified z.txt']);
  t.same(summary(store, before, before), [], 'a tree against itself');
  t.same(summary(store, EMPTY_TREE_OID, before), ['added a.txt', 'added d/e/y.txt', 'added d/x.txt', 'added z.txt'], 'against the empty tree');
});

t.test('tree diff - a name that is a file on one side and a directory on the other', async (t) => {
  const store = new MemoryObjectStore();
  // git orders "foo" (file) < "foo-bar" < "foo.txt" < "foo/" (directory): the two "foo" are apart.
  const before = makeTree(store, { foo: 'file', 'foo-bar': 'b', 'foo.txt': 't' });
  const after = makeTree(store, { 'foo/inner.txt': 'i', 'foo-bar': 'b', 'foo.txt': 'T' });
  t.same(summary(store, before, after), ['deleted foo', 'modified foo.txt', 'added foo/inner.txt']);
  t.same(summary(store, after, before), ['added foo', 'modified foo.txt', 'deleted foo/inner.txt']);
});

t.test('tree diff - a directory mode written as old git did is the same directory', async (t) => {
  const store = new MemoryObjectStore();
  const sub = makeTree(store, { 'x.txt': 'x' });
  const blob = writeBlob(store, 'same');
  const modern = rawTree(store, [['100644', 'a.txt', blob], ['40000', 'sub', sub]]);
  const padded = rawTree(store, [['100664', 'a.txt', blob], ['040000', 'sub', sub]]);
  t.same(summary(store, modern, padded), [], 'no change where only the spelling of the mode differs');
});

t.test('tree diff - one file changed in a directory of 2,000 entries', async (t) => {
  const store = new MemoryObjectStore();
  const files: Record<string, string> = {};
  for (let i = 0; i < 2000; i++) files[`f-${i}.txt`] = `${i}`;
  const before = makeTree(store, files);
  const after = makeTree(store, { ...files, 'f-1234.txt': 'changed', 'f-new.txt': 'new' });
  t.same(summary(store, before, after), ['modified f-1234.txt', 'added f-new.txt']);
});

t.test('tree diff - within a budget of tree bytes: the same answer, or none once the walk reads more', async (t) => {
  const store = new MemoryObjectStore();
  const files: Record<string, string> = {};
  for (let i = 0; i < 2000; i++) files[`d${i % 10}/f-${i}.txt`] = `${i}`;
  const before = makeTree(store, files);
  const after = makeTree(store, { ...files, 'd3/f-3.txt': 'changed' });
  const bytes = (oid: string): number => store.read(oid)!.content.length;
  const d3 = (root: string): string => parseTree(Buffer.from(store.read(root)!.content)).find((e) => e.name === 'd3')!.oid;
  const oneDir = bytes(before) + bytes(after) + bytes(d3(before)) + bytes(d3(after));
  t.same(diffTreesWithin(store, before, after, oneDir)?.map((c) => c.path), ['d3/f-3.txt'], 'a small change fits: the two roots and one directory on each side');
  t.equal(diffTreesWithin(store, before, after, oneDir - 1), null, 'one byte less does not');
  t.equal(diffTreesWithin(store, EMPTY_TREE_OID, after, 64 * 1024), null, 'every directory against the empty tree does not fit');
  t.equal(diffTreesWithin(store, EMPTY_TREE_OID, after, Infinity)?.length, 2000);
});

t.test('tree diff - a tree out of git order, as a pull may bring one, is still compared by name', async (t) => {
  const store = new MemoryObjectStore();
  const a = writeBlob(store, 'a');
  const b = writeBlob(store, 'b');
  const sorted = rawTree(store, [['100644', 'a.txt', a], ['100644', 'b.txt', a]]);
  const unsorted = rawTree(store, [['100644', 'b.txt', b], ['100644', 'a.txt', a]]);
  t.same(summary(store, sorted, unsorted), ['modified b.txt']);
  t.same(summary(store, unsorted, sorted), ['modified b.txt']);
  const duplicated = rawTree(store, [['100644', 'a.txt', a], ['100644', 'a.txt', b], ['100644', 'b.txt', a]]);
  t.same(summary(store, sorted, duplicated), ['modified a.txt'], 'a name twice: its last entry counts');
});

t.test('tree diff - submodules, symlinks and names beyond ASCII', async (t) => {
  const store = new MemoryObjectStore();
  const blob = writeBlob(store, 'same');
  const commit = 'c'.repeat(40);
  const sub = makeTree(store, { 'inner.txt': 'i' });
  const before = rawTree(store, [['100644', 'link', blob], ['160000', 'm', commit], ['100644', 'm.txt', blob], ['100644', 'z.txt', blob], ['100644', 'é.txt', blob]]);
  const after = rawTree(store, [['120000', 'link', blob], ['100644', 'm.txt', blob], ['40000', 'm', sub], ['100644', 'z.txt', blob], ['100644', 'é.txt', writeBlob(store, 'other')]]);
  t.same(summary(store, before, after), ['modified link', 'deleted m', 'added m/inner.txt', 'modified é.txt']);
});

t.test('tree diff - a truncated tree is corrupt', async (t) => {
  const store = new MemoryObjectStore();
  const blob = writeBlob(store, 'x');
  const whole = rawTree(store, [['100644', 'x.txt', blob]]);
  const truncated = store.write('tree', Buffer.from('100644 x.txt\0abc'));
  let thrown: unknown = null;
  try {
    diffTrees(store, whole, truncated);
  } catch (err) {
    thrown = err;
  }
  t.ok(thrown instanceof VcsError && thrown.kind === 'corrupt', `refused as corrupt (${String(thrown)})`);
});
