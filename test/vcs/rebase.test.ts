import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { EMPTY_TREE_OID, readCommit, writeBlob } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { readChangeCommit, writeChangeCommit } from '../../src/vcs/commit.js';
import { isAncestor, mergeBases } from '../../src/vcs/commit-graph.js';
import { materializeTreeSet } from '../../src/vcs/conflict.js';
import { ROOT_CHANGE_ID, newChangeId } from '../../src/vcs/ids.js';
import { createMergeCommit } from '../../src/vcs/merge-commit.js';
import { rebaseDescendants } from '../../src/vcs/rebase.js';
import type { ChangeGraphNode } from '../../src/vcs/rebase.js';
import { applyTreeEdits } from '../../src/vcs/tree-edit.js';
import { ALICE, BOB, T0, WRITER, fsckStrict, makeTree, readText } from './vcs-helpers.js';

const LATER = new Date(T0.getTime() + 3_600_000);

/**
 * A chain of changes on the root: change i writes `file{i}.txt` and line i of `shared.txt`
 * (lines are kept apart by a fixed line: diff3 treats changes to adjacent lines as a conflict).
 */
function buildChain(store: MemoryObjectStore, length: number) {
  const lines = Array.from({ length }, (_, i) => `line ${i}\n--\n`);
  const graph = new Map<string, ChangeGraphNode>();
  const ids: string[] = [];
  const commits: string[] = [];
  let tree = makeTree(store, { 'shared.txt': lines.join('') });
  let parentCommit: string | null = null;
  for (let i = 0; i < length; i++) {
    const current = [...lines];
    lines[i] = `line ${i} by change ${i}\n--\n`;
    current[i] = lines[i]!;
    tree = applyTreeEdits(store, tree, [
      { op: 'write', path: `file${i}.txt`, blobOid: writeBlob(store, `${i}\n`), mode: '100644' },
      { op: 'write', path: 'shared.txt', blobOid: writeBlob(store, current.join('')), mode: '100644' },
    ]);
    const changeId = newChangeId();
    const oid = writeChangeCommit(store, {
      trees: tree,
      parents: parentCommit ? [parentCommit] : [],
      changeId,
      authors: [ALICE, BOB],
      authoredAt: new Date(T0.getTime() + i * 1000),
      committer: ALICE,
      committedAt: new Date(T0.getTime() + i * 1000),
      description: `change ${i}\n`,
    });
    graph.set(changeId, { commitOid: oid, parentChangeIds: ids.length ? [ids[ids.length - 1]!] : [ROOT_CHANGE_ID] });
    ids.push(changeId);
    commits.push(oid);
    parentCommit = oid;
  }
  return { graph, ids, commits };
}

/** Evolves change `index` of the chain with `edit` applied to its tree; returns the new commit. */
function evolve(store: MemoryObjectStore, commitOid: string, path: string, content: string): string {
  const view = readChangeCommit(store, commitOid);
  const tree = applyTreeEdits(store, view.rootTreeOid, [{ op: 'write', path, blobOid: writeBlob(store, content), mode: '100644' }]);
  return writeChangeCommit(store, {
    trees: tree,
    parents: view.parents,
    changeId: view.changeId,
    authors: view.authors,
    authoredAt: new Date(view.authoredAt),
    committer: WRITER,
    committedAt: LATER,
    description: view.message,
  });
}

t.test('rebase - editing change 5 of a chain of 20 rebases 6..20 parents first, keeping ids and authors', async (t) => {
  const store = new MemoryObjectStore();
  const { graph, ids, commits } = buildChain(store, 20);
  const new5 = evolve(store, commits[5]!, 'file5.txt', 'edited five\n');
  const rebased = rebaseDescendants(store, graph, new Map([[commits[5]!, new5]]), { committer: WRITER, committedAt: LATER });
  t.same(rebased.map((r) => r.changeId), ids.slice(6));
  t.ok(rebased.every((r) => !r.isConflicted && r.conflicts.length === 0));
  let parent = new5;
  for (const [k, r] of rebased.entries()) {
    const i = k + 6;
    t.equal(r.oldCommitOid, commits[i]);
    const view = readChangeCommit(store, r.newCommitOid);
    t.same(view.parents, [parent], `change ${i} sits on the new ${i - 1}`);
    t.equal(view.changeId, ids[i]);
    t.same(view.authors, [ALICE, BOB]);
    t.equal(view.authoredAt, new Date(T0.getTime() + i * 1000).toISOString());
    t.same(view.committer, { ...WRITER, date: LATER.toISOString() });
    t.equal(view.message, `change ${i}\n`);
    t.equal(readText(store, view.rootTreeOid, 'file5.txt'), 'edited five\n');
    t.equal(readText(store, view.rootTreeOid, `file${i}.txt`), `${i}\n`);
    parent = r.newCommitOid;
  }
  const tip = readChangeCommit(store, parent);
  t.match(readText(store, tip.rootTreeOid, 'shared.txt'), /line 19 by change 19\n--\n$/);
  t.ok(isAncestor(store, new5, parent));
  t.notOk(isAncestor(store, commits[5]!, parent), 'the old commit is no longer in the history');
  const fsck = fsckStrict(store, { 'refs/heads/main': parent });
  t.ok(fsck.ok, fsck.output);
});

t.test('rebase - a descendant editing the same lines becomes conflicted, target = new parent, source = its own', async (t) => {
  const store = new MemoryObjectStore();
  const { graph, ids, commits } = buildChain(store, 12);
  // Change 5 now rewrites line 7 too, which change 7 also edits.
  const old5 = readChangeCommit(store, commits[5]!);
  const shared = readText(store, old5.rootTreeOid, 'shared.txt')!.replace('line 7\n', 'line 7 from the new five\n');
  const new5 = evolve(store, commits[5]!, 'shared.txt', shared);
  const rebased = rebaseDescendants(store, graph, new Map([[commits[5]!, new5]]), { committer: WRITER, committedAt: LATER });
  t.same(rebased.map((r) => [r.changeId, r.isConflicted]), ids.slice(6).map((id, k) => [id, k + 6 >= 7]));
  const seven = rebased.find((r) => r.changeId === ids[7])!;
  t.same(seven.conflicts.map((c) => c.path), ['shared.txt']);
  const view = readChangeCommit(store, seven.newCommitOid);
  t.equal(view.isConflicted, true);
  t.equal(view.changeId, ids[7]);
  const shown = readText(store, materializeTreeSet(store, view.trees), 'shared.txt')!;
  t.match(shown, /<<<<<<< target\nline 7 from the new five\n\|\|\|\|\|\|\| base\nline 7\n=======\nline 7 by change 7\n>>>>>>> source\n/);
  // A descendant of a conflicted change stays conflicted on the same path but keeps its own edits.
  const last = readChangeCommit(store, rebased[rebased.length - 1]!.newCommitOid);
  t.equal(last.isConflicted, true);
  t.equal(readText(store, materializeTreeSet(store, last.trees), 'file11.txt'), '11\n');
  t.equal(last.trees.length, 3, 'inherited conflicts simplify back to three terms');
  const fsck = fsckStrict(store, { 'refs/heads/main': last.oid });
  t.ok(fsck.ok, fsck.output);
});

t.test('rebase - merges keep all parents and the rebase follows both branches', async (t) => {
  const store = new MemoryObjectStore();
  const mk = (tree: string, parents: string[], changeId = newChangeId()): string =>
    writeChangeCommit(store, { trees: tree, parents, changeId, authors: [ALICE], authoredAt: T0, committer: ALICE, committedAt: T0, description: '' });
  const rootTree = makeTree(store, { 'a.txt': 'a\n', 'b.txt': 'b\n' });
  const ids = { base: newChangeId(), left: newChangeId(), right: newChangeId(), merge: newChangeId() };
  const base = mk(rootTree, [], ids.base);
  const left = mk(makeTree(store, { 'a.txt': 'A\n', 'b.txt': 'b\n' }), [base], ids.left);
  const right = mk(makeTree(store, { 'a.txt': 'a\n', 'b.txt': 'B\n' }), [base], ids.right);
  const merge = mk(makeTree(store, { 'a.txt': 'A\n', 'b.txt': 'B\n', 'm.txt': 'merge\n' }), [left, right], ids.merge);
  const graph = new Map<string, ChangeGraphNode>([
    [ids.base, { commitOid: base, parentChangeIds: [ROOT_CHANGE_ID] }],
    [ids.left, { commitOid: left, parentChangeIds: [ids.base] }],
    [ids.right, { commitOid: right, parentChangeIds: [ids.base] }],
    [ids.merge, { commitOid: merge, parentChangeIds: [ids.left, ids.right] }],
  ]);
  const newBase = mk(makeTree(store, { 'a.txt': 'a\n', 'b.txt': 'b\n', 'c.txt': 'c\n' }), [], ids.base);
  const rebased = rebaseDescendants(store, graph, new Map([[base, newBase]]), { committer: WRITER, committedAt: LATER });
  t.same(rebased.map((r) => r.changeId).sort(), [ids.left, ids.right, ids.merge].sort());
  t.equal(rebased[rebased.length - 1]!.changeId, ids.merge, 'the merge comes after both parents');
  const m = readChangeCommit(store, rebased[rebased.length - 1]!.newCommitOid);
  const byChange = new Map(rebased.map((r) => [r.changeId, r.newCommitOid]));
  t.same(m.parents, [byChange.get(ids.left), byChange.get(ids.right)]);
  t.equal(m.isConflicted, false);
  t.same(['a.txt', 'b.txt', 'c.txt', 'm.txt'].map((p) => readText(store, m.rootTreeOid, p)), ['A\n', 'B\n', 'c\n', 'merge\n']);
  t.same(mergeBases(store, [byChange.get(ids.left)!], [byChange.get(ids.right)!]), [newBase]);
});

t.test('merge commits - parents are target then source and the tree merges from their merge base', async (t) => {
  const store = new MemoryObjectStore();
  const mk = (files: Record<string, string>, parents: string[]): string =>
    writeChangeCommit(store, { trees: makeTree(store, files), parents, changeId: newChangeId(), authors: [ALICE], authoredAt: T0, committer: ALICE, committedAt: T0, description: 'x\n' });
  const base = mk({ 'f.txt': 'one\ntwo\nthree\n' }, []);
  const target = mk({ 'f.txt': 'ONE\ntwo\nthree\n' }, [base]);
  const source = mk({ 'f.txt': 'one\ntwo\nTHREE\n', 'new.txt': 'n\n' }, [base]);
  const changeId = newChangeId();
  const r = createMergeCommit(store, { targetCommitOid: target, sourceCommitOid: source, changeId, authors: [BOB], authoredAt: LATER, committer: BOB, committedAt: LATER, description: "Merge bookmark 'feature' into 'main'" });
  t.equal(r.isConflicted, false);
  const view = readChangeCommit(store, r.commitOid);
  t.same(view.parents, [target, source]);
  t.equal(view.changeId, changeId);
  t.equal(readText(store, view.rootTreeOid, 'f.txt'), 'ONE\ntwo\nTHREE\n');
  t.equal(readText(store, view.rootTreeOid, 'new.txt'), 'n\n');
  t.ok(isAncestor(store, source, r.commitOid));
  t.ok(isAncestor(store, target, r.commitOid));
  t.notOk(isAncestor(store, source, target), 'source is not in the target history (not a no-op)');
  t.ok(isAncestor(store, base, target));
  t.ok(isAncestor(store, target, target));
  const fsck = fsckStrict(store, { 'refs/heads/main': r.commitOid });
  t.ok(fsck.ok, fsck.output);
});

t.test('merge commits - conflicts are refused with details unless allowed or resolved', async (t) => {
  const store = new MemoryObjectStore();
  const mk = (files: Record<string, string>, parents: string[]): string =>
    writeChangeCommit(store, { trees: makeTree(store, files), parents, changeId: newChangeId(), authors: [ALICE], authoredAt: T0, committer: ALICE, committedAt: T0, description: '' });
  const base = mk({ 'f.txt': 'x\n' }, []);
  const target = mk({ 'f.txt': 'target\n' }, [base]);
  const source = mk({ 'f.txt': 'source\n' }, [base]);
  const input = { targetCommitOid: target, sourceCommitOid: source, changeId: newChangeId(), authors: [BOB], authoredAt: LATER, committer: BOB, committedAt: LATER, description: '' };
  let refused: unknown;
  try {
    createMergeCommit(store, input);
  } catch (err) {
    refused = err;
  }
  t.ok(refused instanceof VcsError && refused.kind === 'conflict');
  t.same((refused as VcsError).details?.conflict_paths, ['f.txt']);
  t.equal(((refused as VcsError).details?.conflicts as Array<{ hunks: unknown[] }>)[0]!.hunks.length, 1);
  const kept = createMergeCommit(store, { ...input, allowConflicted: true });
  t.equal(kept.isConflicted, true);
  t.equal(readChangeCommit(store, kept.commitOid).isConflicted, true);
  const resolved = createMergeCommit(store, { ...input, resolutions: [{ path: 'f.txt', take: 'source' }] });
  t.equal(resolved.isConflicted, false);
  t.equal(readText(store, readCommit(store, resolved.commitOid).tree, 'f.txt'), 'source\n');
  const fsck = fsckStrict(store, { 'refs/heads/a': kept.commitOid, 'refs/heads/b': resolved.commitOid });
  t.ok(fsck.ok, fsck.output);
});

t.test('commits - authors, trailers, empty descriptions and synthetic ids read back as the API shows them', async (t) => {
  const store = new MemoryObjectStore();
  const changeId = newChangeId();
  const oid = writeChangeCommit(store, {
    trees: makeTree(store, {}),
    parents: [],
    changeId,
    authors: [{ name: 'Agent', email: null }, BOB, { name: 'Helper', email: null }],
    authoredAt: T0,
    committer: { name: '', email: null },
    committedAt: LATER,
    description: '',
    attribution: { provider: 'claude', model: 'claude-sonnet-4-5' },
  });
  const view = readChangeCommit(store, oid);
  t.equal(view.message, '');
  t.same(view.authors, [{ name: 'Agent', email: null }, BOB, { name: 'Helper', email: null }]);
  t.same(view.author, { name: 'Agent', email: '', date: T0.toISOString() });
  t.same(view.committer, { name: '', email: '', date: LATER.toISOString() });
  t.equal(view.aiProvider, 'claude');
  t.equal(view.aiModel, 'claude-sonnet-4-5');
  t.equal(view.changeId, changeId);
  t.equal(view.hasChangeIdHeader, true);
  t.equal(view.rootTreeOid, EMPTY_TREE_OID);
  const fsck = fsckStrict(store, { 'refs/heads/main': oid });
  t.ok(fsck.ok, fsck.output);
  // A commit without the header (e.g. imported) gets jj's synthetic id.
  const plain = store.write('commit', Buffer.from(`tree ${EMPTY_TREE_OID}\nauthor A <a@x> 0 +0000\ncommitter A <a@x> 0 +0000\n\nimported\n`));
  const imported = readChangeCommit(store, plain);
  t.equal(imported.hasChangeIdHeader, false);
  t.match(imported.changeId, /^[k-z]{32}$/);
  t.equal(imported.message, 'imported\n');
});
