import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { MemoryRepoStore } from '../../src/vcs/memory-repo-store.js';
import { ROOT_CHANGE_ID } from '../../src/vcs/ids.js';
import type { ChangeRecord } from '../../src/vcs/repo-store.js';
import { RepoTransaction } from '../../src/vcs/transaction.js';
import { ALICE, T0, WRITER, makeTree, readText } from './vcs-helpers.js';

/** A transaction that lists what it announces, in order. */
class Recording extends RepoTransaction {
  readonly heard: string[] = [];
  protected override onChangeCreated(record: ChangeRecord): void {
    this.heard.push(`created ${record.id}`);
  }
  protected override onChangeEvolved(record: ChangeRecord, previous: string): void {
    this.heard.push(`evolved ${record.id} from ${previous}`);
  }
}

function setup() {
  const graph = new MemoryRepoStore();
  const objects = new MemoryObjectStore();
  const tx = (seq = 1) => new Recording(graph, objects, { now: T0, committer: WRITER, seq });
  return { graph, objects, tx };
}

const fileChange = (objects: MemoryObjectStore, parents: string[], files: Record<string, string>) => ({
  parents,
  trees: [makeTree(objects, files)],
  authors: [ALICE],
  authoredAt: T0,
  description: 'x\n',
});

t.test('transaction - evolving a change rebases its descendants and records one evolution entry each', (t) => {
  const { graph, objects, tx } = setup();
  const first = tx();
  const base = first.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  const child = first.createChange(fileChange(objects, [base.id], { 'a.txt': 'a\n', 'b.txt': 'b\n' }));
  first.recordEvolution('op_1');
  t.same(graph.children(base.id), [child.id]);
  t.equal(graph.change(child.id)!.generation, 2);
  t.equal(graph.changeOfCommit(child.commit_oid), child.id);

  const second = tx(7);
  const evolved = second.evolveChange(second.change(base.id), { trees: [makeTree(objects, { 'a.txt': 'A\n' })] });
  second.recordEvolution('op_2');
  t.equal(evolved.rebased.length, 1);
  const rebased = graph.change(child.id)!;
  t.not(rebased.commit_oid, child.commit_oid, 'the child has a new commit');
  t.equal(rebased.rebased_at_seq, 7, 'marked with the writer that rebased it');
  t.same(second.rebasedIds, [child.id]);
  t.equal(readText(objects, second.treesOf(rebased)[0]!, 'a.txt'), 'A\n', 'the child sees its parent\'s new content');
  t.equal(readText(objects, second.treesOf(rebased)[0]!, 'b.txt'), 'b\n', 'and keeps its own');
  t.same(second.heard, [`evolved ${base.id} from ${base.commit_oid}`, `evolved ${child.id} from ${child.commit_oid}`]);
  t.same(
    graph.evolution(child.id).map((e) => [e.operation_id, e.predecessor_oid]),
    [
      ['op_1', null],
      ['op_2', child.commit_oid],
    ],
  );
  t.end();
});

t.test('transaction - an evolve that says what the change already says writes nothing', (t) => {
  const { graph, objects, tx } = setup();
  const w = tx();
  const change = w.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  w.recordEvolution('op_1');
  const again = tx();
  const result = again.evolveChange(change, { trees: again.treesOf(change) });
  again.recordEvolution('op_2');
  t.equal(result.previousCommitOid, null);
  t.same(again.heard, []);
  t.equal(graph.evolution(change.id).length, 1);
  t.end();
});

t.test('transaction - a bookmark move that would not advance history is refused with every name', (t) => {
  const { graph, objects, tx } = setup();
  const w = tx();
  const base = w.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  const next = w.createChange(fileChange(objects, [base.id], { 'a.txt': 'b\n' }));
  w.moveBookmarks([
    { name: 'main', change_id: next.id, mode: 'create' },
    { name: 'dev', change_id: next.id, mode: 'create' },
  ]);
  const err = t.throws(() => w.moveBookmarks([{ name: 'main', change_id: base.id }, { name: 'dev', change_id: base.id }])) as VcsError;
  t.equal(err.kind, 'history-rewrite');
  t.same(err.details?.bookmark_names, ['main', 'dev']);
  t.equal(graph.bookmark('main')!.change_id, next.id, 'nothing moved');
  const [moved] = w.moveBookmarks([{ name: 'main', change_id: base.id, allow_backwards: true }]);
  t.equal(moved!.from_change_id, next.id);
  t.equal(graph.bookmark('main')!.change_id, base.id);
  t.equal((t.throws(() => w.moveBookmarks([{ name: 'gone', change_id: base.id }])) as VcsError).kind, 'bookmark-not-found');
  t.equal((t.throws(() => w.moveBookmarks([{ name: 'dev', change_id: base.id, mode: 'create' }])) as VcsError).kind, 'bookmark-exists');
  t.equal((t.throws(() => w.moveBookmarks([{ name: 'dev', change_id: next.id, expected_change_id: base.id }])) as VcsError).kind, 'stale');
  t.end();
});

t.test('transaction - a pushed commit that moves a change re-indexes children and generations', (t) => {
  const { graph, objects, tx } = setup();
  const w = tx();
  const a = w.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  const b = w.createChange(fileChange(objects, [a.id], { 'b.txt': 'b\n' }));
  const c = w.createChange(fileChange(objects, [b.id], { 'c.txt': 'c\n' }));
  t.equal(graph.change(c.id)!.generation, 3);
  // b moves onto the root: it and c drop a generation.
  w.adoptCommit(w.change(b.id), b.commit_oid, [ROOT_CHANGE_ID], false);
  t.same(graph.children(a.id), []);
  t.same(graph.children(ROOT_CHANGE_ID).sort(), [a.id, b.id].sort());
  t.equal(graph.change(b.id)!.generation, 1);
  t.equal(graph.change(c.id)!.generation, 2);
  t.end();
});

t.test('transaction - unknown and malformed change ids are the model\'s errors', (t) => {
  const { tx } = setup();
  const w = tx();
  t.equal((t.throws(() => w.change('k'.repeat(32))) as VcsError).kind, 'change-not-found');
  t.equal((t.throws(() => w.change('nope')) as VcsError).kind, 'invalid-request');
  t.equal(w.changeOrRoot(ROOT_CHANGE_ID), null);
  t.end();
});

t.test('transaction - the first write is one on the root while the default bookmark is there and no change exists', (t) => {
  const { graph, objects, tx } = setup();
  const w = tx();
  t.notOk(w.isFirstWrite(ROOT_CHANGE_ID, 'main'), 'no default bookmark yet');
  graph.putBookmark({ name: 'main', change_id: ROOT_CHANGE_ID, created_at: T0.toISOString(), updated_at: T0.toISOString() });
  t.ok(w.isFirstWrite(ROOT_CHANGE_ID, 'main'));
  const made = w.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  t.notOk(w.isFirstWrite(ROOT_CHANGE_ID, 'main'), 'a change exists');
  t.notOk(w.isFirstWrite(made.id, 'main'), 'not on the root');
  t.end();
});

t.test('transaction - bookmarks are removed and commits found through the store alone', (t) => {
  const { graph, objects, tx } = setup();
  const w = tx();
  const made = w.createChange(fileChange(objects, [ROOT_CHANGE_ID], { 'a.txt': 'a\n' }));
  const first = made.commit_oid;
  const evolved = w.evolveChange(made, { trees: [makeTree(objects, { 'a.txt': 'b\n' })] }).record;
  t.equal(w.changeOfCommit(first), made.id, 'an earlier commit still names its change');
  t.equal(w.changeOfCommit(evolved.commit_oid), made.id);
  t.equal(w.changeOfCommit('0'.repeat(40)), undefined);
  t.ok(w.isAncestor(ROOT_CHANGE_ID, made.id));
  t.notOk(w.isAncestor(made.id, ROOT_CHANGE_ID));
  w.moveBookmarks([{ name: 'feat', change_id: made.id, mode: 'create' }]);
  t.equal(w.removeBookmark('feat').change_id, made.id, 'the removed bookmark is returned');
  t.equal(graph.bookmark('feat'), undefined, 'and gone from the store');
  const err = t.throws(() => w.removeBookmark('feat')) as VcsError;
  t.same({ kind: err.kind, details: err.details }, { kind: 'bookmark-not-found', details: { bookmark: 'feat' } });
  t.end();
});
