import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { readTree } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { JJ_CONFLICT_README, treeSetOfCommit } from '../../src/vcs/conflict-layout.js';
import { conflictHunks, materializeTreeSet, mergeConflictDetails, resolveConflicts } from '../../src/vcs/conflict.js';
import { readChangeCommit, writeChangeCommit } from '../../src/vcs/commit.js';
import { readCommit } from '../../src/vcs/git-object.js';
import { newChangeId } from '../../src/vcs/ids.js';
import { listTreeSetConflicts, mergeTrees } from '../../src/vcs/tree-merge.js';
import { listFiles, lookupPath } from '../../src/vcs/tree-edit.js';
import { ALICE, T0, WRITER, exportToGit, fsckStrict, makeTree, readText } from './vcs-helpers.js';

function errorOf(fn: () => unknown): VcsError {
  try {
    fn();
  } catch (err) {
    if (err instanceof VcsError) return err;
    throw err;
  }
  throw new Error('expected a VcsError');
}

const BASE = 'a\nb\nc\nd\ne\n';

t.test('tree merge - independent edits, additions and a mode change merge cleanly', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'f.txt': BASE, 'run.sh': 'echo\n', 'keep/x': 'x' });
  const target = makeTree(store, { 'f.txt': 'A\nb\nc\nd\ne\n', 'run.sh': { content: 'echo\n', mode: '100755' }, 'keep/x': 'x', 'new/t.txt': 't' });
  const source = makeTree(store, { 'f.txt': 'a\nb\nc\nd\nE\n', 'run.sh': 'echo hi\n', 'keep/x': 'x', 'new/s.txt': 's' });
  const r = mergeTrees(store, base, target, source);
  t.equal(r.isConflicted, false);
  t.same(r.conflicts, []);
  t.equal(r.trees.length, 1);
  t.equal(r.treeOid, r.trees[0]);
  t.equal(readText(store, r.treeOid, 'f.txt'), 'A\nb\nc\nd\nE\n');
  t.same(lookupPath(store, r.treeOid, 'run.sh')?.mode, '100755');
  t.equal(readText(store, r.treeOid, 'run.sh'), 'echo hi\n');
  t.same(listFiles(store, r.treeOid).map((f) => f.path), ['f.txt', 'keep/x', 'new/s.txt', 'new/t.txt', 'run.sh']);
  t.equal(mergeTrees(store, base, target, target).treeOid, target, 'the same change on both sides');
});

t.test('tree merge - add/add, delete/modify and file-vs-directory are conflicts with their sides', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'mod.txt': BASE, 'thing': 'file\n', 'same.txt': 's' });
  const target = makeTree(store, { 'added.txt': 'target\n', 'thing': 'file changed\n', 'same.txt': 's' });
  const source = makeTree(store, { 'added.txt': 'source\n', 'mod.txt': 'changed\n', 'thing/inner.txt': 'dir now\n', 'same.txt': 's' });
  const r = mergeTrees(store, base, target, source);
  t.equal(r.isConflicted, true);
  t.equal(r.trees.length, 3);
  t.same(r.conflicts.map((c) => c.path), ['added.txt', 'mod.txt', 'thing']);
  const [added, mod, thing] = r.conflicts;
  t.equal(added!.base, null);
  t.ok(added!.target && added!.source);
  t.equal(mod!.target, null, 'deleted on the target side');
  t.equal(mod!.source?.mode, '100644');
  t.equal(thing!.source?.mode, '40000', 'a directory on the source side');
  t.equal(thing!.target?.mode, '100644');
  t.same(listTreeSetConflicts(store, r.trees).map((c) => c.path), ['added.txt', 'mod.txt', 'thing'], 'listing a stored set finds the same paths');
});

t.test('conflicts - a conflicted commit uses the jj layout and passes git fsck --strict', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'f.txt': BASE, 'other.txt': 'o\n' });
  const target = makeTree(store, { 'f.txt': 'a\nTARGET\nc\nd\ne\n', 'other.txt': 'o\n' });
  const source = makeTree(store, { 'f.txt': 'a\nSOURCE\nc\nd\ne\n', 'other.txt': 'o2\n' });
  const r = mergeTrees(store, base, target, source);
  const changeId = newChangeId();
  const oid = writeChangeCommit(store, { trees: r.trees, parents: [], changeId, authors: [ALICE], authoredAt: T0, committer: WRITER, committedAt: T0, description: 'conflicted\n' });
  const commit = readCommit(store, oid);
  t.same(commit.extraHeaders.map((h) => h.name), ['jj:trees', 'change-id']);
  t.equal(commit.extraHeaders[0]!.value, r.trees.join(' '), 'jj:trees lists side0 base0 side1');
  t.same(treeSetOfCommit(commit), r.trees);
  t.same(
    readTree(store, commit.tree).map((e) => e.name),
    ['.jjconflict-base-0', '.jjconflict-side-0', '.jjconflict-side-1', 'JJ-CONFLICT-README', 'f.txt', 'other.txt'],
  );
  t.equal(readText(store, commit.tree, 'JJ-CONFLICT-README'), JJ_CONFLICT_README);
  t.equal(lookupPath(store, commit.tree, '.jjconflict-side-0')?.oid, r.trees[0]);
  t.equal(readText(store, commit.tree, 'other.txt'), 'o2\n', 'the first side carries what merged cleanly');
  const view = readChangeCommit(store, oid);
  t.equal(view.isConflicted, true);
  t.same(view.conflictTrees, r.trees);
  t.equal(view.changeId, changeId);
  const fsck = fsckStrict(store, { 'refs/heads/main': oid });
  t.ok(fsck.ok, fsck.output);
  const repo = exportToGit(store, { 'refs/heads/main': oid });
  t.teardown(repo.cleanup);
  t.match(repo.git('cat-file', '-p', oid).stdout, /\njj:trees [0-9a-f]{40} [0-9a-f]{40} [0-9a-f]{40}\nchange-id [k-z]{32}\n/);
});

t.test('conflicts - the materialized view shows diff3 markers and hides the layout', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'f.txt': BASE, 'gone.txt': 'base\n', 'img.bin': '\0old' });
  const target = makeTree(store, { 'f.txt': 'a\nTARGET\nc\nd\ne\n', 'img.bin': '\0target' });
  const source = makeTree(store, { 'f.txt': 'a\nSOURCE\nc\nd\nE\n', 'gone.txt': 'modified\n', 'img.bin': '\0source' });
  const r = mergeTrees(store, base, target, source);
  t.same(r.conflicts.map((c) => c.path), ['f.txt', 'gone.txt', 'img.bin']);
  const view = materializeTreeSet(store, r.trees);
  t.same(readTree(store, view).map((e) => e.name), ['f.txt', 'gone.txt', 'img.bin']);
  t.equal(
    readText(store, view, 'f.txt'),
    'a\n<<<<<<< target\nTARGET\n||||||| base\nb\n=======\nSOURCE\n>>>>>>> source\nc\nd\nE\n',
  );
  t.equal(readText(store, view, 'gone.txt'), '<<<<<<< target\n||||||| base\nbase\n=======\nmodified\n>>>>>>> source\n', 'delete/modify shows the deleted side empty');
  t.equal(readText(store, view, 'img.bin'), '\0target', 'binary conflicts show the first side');
  t.equal(materializeTreeSet(store, r.trees), view, 'deterministic');
  t.equal(materializeTreeSet(store, [base]), base, 'a clean tree is its own view');
  const layout = r.treeOid;
  t.not(layout, view);
});

t.test('conflicts - hunks resolved one by one make the tree clean', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'f.txt': 'h1\nx\nx\nx\nx\nh2\n', 'bin': '\0b' });
  const target = makeTree(store, { 'f.txt': 'T1\nx\nx\nx\nx\nT2\n', 'bin': '\0t' });
  const source = makeTree(store, { 'f.txt': 'S1\nx\nx\nx\nx\nS2\n', 'bin': '\0s' });
  const r = mergeTrees(store, base, target, source);
  const f = r.conflicts.find((c) => c.path === 'f.txt')!;
  const hunks = conflictHunks(store, f);
  t.equal(hunks.length, 2);
  t.same(
    hunks.map((h) => [h.old_start, h.old_lines, h.new_start, h.new_lines]),
    [
      [1, 1, 1, 7],
      [6, 1, 12, 7],
    ],
  );
  t.equal(Buffer.from(hunks[0]!.base!.content, 'base64').toString(), 'h1\n');
  t.equal(Buffer.from(hunks[1]!.source!.content, 'base64').toString(), 'S2\n');
  t.same(conflictHunks(store, f).map((h) => h.hunk_id), hunks.map((h) => h.hunk_id), 'hunk ids are stable');
  t.same(conflictHunks(store, r.conflicts.find((c) => c.path === 'bin')!), [], 'binary conflicts have no hunks');
  const details = mergeConflictDetails(store, r.conflicts);
  t.same(details.conflict_paths, ['bin', 'f.txt']);

  const incomplete = errorOf(() => resolveConflicts(store, r.trees, [{ path: 'f.txt', hunks: [{ hunk_id: hunks[0]!.hunk_id, take: 'target' }] }]));
  t.equal(incomplete.kind, 'conflict');
  t.same(incomplete.details?.missing_hunk_ids, [hunks[1]!.hunk_id]);
  t.same(incomplete.details?.conflict_paths, ['bin', 'f.txt']);

  const partial = resolveConflicts(store, r.trees, [
    { path: 'f.txt', hunks: [{ hunk_id: hunks[0]!.hunk_id, take: 'target' }, { hunk_id: hunks[1]!.hunk_id, content: 'mine\n' }] },
  ]);
  t.equal(partial.isConflicted, true, 'bin is still conflicted');
  t.same(partial.conflicts.map((c) => c.path), ['bin']);
  const clean = resolveConflicts(store, partial.trees, [{ path: 'bin', take: 'source' }]);
  t.equal(clean.isConflicted, false);
  t.equal(clean.trees.length, 1);
  t.equal(readText(store, clean.treeOid, 'f.txt'), 'T1\nx\nx\nx\nx\nmine\n');
  t.equal(readText(store, clean.treeOid, 'bin'), '\0s');
});

t.test('conflicts - whole-file resolutions: take, content, and a side without the file deletes it', async (t) => {
  const store = new MemoryObjectStore();
  const base = makeTree(store, { 'del.txt': 'base\n', 'f.txt': 'base\n' });
  const target = makeTree(store, { 'f.txt': 'target\n' });
  const source = makeTree(store, { 'del.txt': 'changed\n', 'f.txt': 'source\n' });
  const r = mergeTrees(store, base, target, source);
  const done = resolveConflicts(store, r.trees, [
    { path: 'del.txt', take: 'target' },
    { path: 'f.txt', content: Buffer.from('both\n').toString('base64'), encoding: 'base64' },
  ]);
  t.equal(done.isConflicted, false);
  t.same(listFiles(store, done.treeOid).map((f) => f.path), ['f.txt']);
  t.equal(readText(store, done.treeOid, 'f.txt'), 'both\n');
  t.equal(errorOf(() => resolveConflicts(store, r.trees, [{ path: 'nope.txt', take: 'source' }])).kind, 'invalid-resolution');
  t.equal(errorOf(() => resolveConflicts(store, r.trees, [{ path: 'f.txt', take: 'source' }, { path: 'f.txt', take: 'target' }])).kind, 'invalid-resolution');
  t.equal(errorOf(() => resolveConflicts(store, r.trees, [{ path: 'f.txt', take: 'source', content: 'x' }])).kind, 'invalid-resolution');
});

t.test('conflicts - take is refused on a conflict of more than two sides', async (t) => {
  const store = new MemoryObjectStore();
  const trees = ['1', '0', '2', '0', '3'].map((v) => makeTree(store, { 'f.txt': `${v}\n` }));
  const conflicts = listTreeSetConflicts(store, trees);
  t.equal(conflicts[0]!.terms.length, 5);
  t.same(conflictHunks(store, conflicts[0]!), []);
  t.equal(errorOf(() => resolveConflicts(store, trees, [{ path: 'f.txt', take: 'target' }])).kind, 'invalid-resolution');
  const resolved = resolveConflicts(store, trees, [{ path: 'f.txt', content: 'merged\n' }]);
  t.equal(resolved.isConflicted, false);
  t.match(readText(store, materializeTreeSet(store, trees), 'f.txt'), /^<<<<<<< target\n1\n\|\|\|\|\|\|\| base\n0\n=======\n2\n/);
});
