import t from 'tap';
import { writeBlob } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { lookupPath, walkTree } from '../../src/vcs/tree-edit.js';
import { cachedLookup, cachedWalk, treeEntryCount } from '../../src/storage/read/tree-index.js';
import { makeTree } from '../vcs/vcs-helpers.js';

/**
 * The read path's tree index: a tree wider than 512 KiB is looked up by binary search in its
 * bytes instead of being parsed, and answers every lookup as the plain walk of src/vcs does,
 * names that sort differently as a file and as a directory included; a wide tree out of git's
 * order is still found by name.
 */
const WIDE = 20_000;

function wideTree(store: MemoryObjectStore): string {
  const files: Record<string, string> = {};
  for (let i = 0; i < WIDE; i++) files[`f-${String(i).padStart(5, '0')}.txt`] = `${i}\n`;
  // git orders the file "foo" < "foo-bar" < "foo.txt" < the directory "foo" ("foo/"): apart.
  Object.assign(files, { foo: 'file', 'foo-bar': 'b', 'foo.txt': 't', 'dir/inner.txt': 'i', 'dir-x': 'x', 'ünï.txt': 'u' });
  return makeTree(store, files);
}

t.test('lookups in a wide tree answer as the plain walk does', async (t) => {
  const store = new MemoryObjectStore();
  const root = wideTree(store);
  t.ok(store.read(root)!.content.length > 512 * 1024, 'the tree is wide');
  const paths = ['f-00000.txt', 'f-12345.txt', 'f-19999.txt', 'foo', 'foo-bar', 'foo.txt', 'dir', 'dir/inner.txt', 'dir-x', 'ünï.txt', 'f-20000.txt', 'fo', 'foo/x', 'dir/none', 'zzz', '', 'f-00001.txt/x'];
  for (const path of paths) t.same(cachedLookup(store, 'scope', root, path), lookupPath(store, root, path) ?? undefined, JSON.stringify(path));
  t.equal(treeEntryCount(store, 'scope', root), WIDE + 6);
  const walked = [...cachedWalk(store, 'scope', root, 2, '')].map((e) => e.path);
  t.equal(walked.length, WIDE + 7, 'a walk reaches every entry and the directory\'s file');
  t.same(walked, [...walkTree(store, root, { maxDepth: 2 })].map((e) => e.path), 'in git order, as the plain walk');
  t.same(walked.slice(0, 3), ['dir-x', 'dir', 'dir/inner.txt'], '"dir-x" sorts before the directory "dir"');
});

t.test('a wide tree out of git order is still found by name', async (t) => {
  const store = new MemoryObjectStore();
  const oid = writeBlob(store, 'x');
  const entries: Buffer[] = [];
  // Descending names: every neighbour out of order.
  for (let i = WIDE - 1; i >= 0; i--) entries.push(Buffer.from(`100644 g-${String(i).padStart(5, '0')}\0`), Buffer.from(oid, 'hex'));
  const root = store.write('tree', Buffer.concat(entries));
  t.ok(store.read(root)!.content.length > 512 * 1024);
  t.same(cachedLookup(store, 'disorder', root, 'g-00007'), { mode: '100644', oid });
  t.same(cachedLookup(store, 'disorder', root, 'g-19990'), { mode: '100644', oid });
  t.equal(cachedLookup(store, 'disorder', root, 'g-20000'), undefined);
  t.equal(treeEntryCount(store, 'disorder', root), WIDE);
});
