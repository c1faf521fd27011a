/**
 * Rebasing descendants after changes were rewritten (spec §5.3), as jj's `rebase_descendants`:
 * every descendant, parents first, gets
 *   new tree = merge(new parents' trees) + (old tree − merge(old parents' trees))
 * i.e. a three-way merge with base = the old parents' merge, target = the new parents' merge and
 * source = the change's own old tree. A merge keeps all its parents. What does not merge cleanly
 * becomes a conflicted commit in jj's layout whose first side (`target`) is the new parents'.
 */
import type { ObjectStore } from './object-store.js';
import { EMPTY_TREE_OID, readCommit } from './git-object.js';
import { treeSetOfCommit } from './conflict-layout.js';
import type { TreeSet } from './conflict-layout.js';
import { mergeBases } from './commit-graph.js';
import { rewriteCommit } from './commit.js';
import type { Person } from './commit.js';
import { ROOT_CHANGE_ID } from './ids.js';
import { mergeTreeSets } from './tree-merge.js';
import type { PathConflict, TreeMergeResult } from './tree-merge.js';
import { writeEmptyTree } from './tree-edit.js';
import { VcsError } from './errors.js';

export interface ChangeGraphNode {
  /** The change's current commit (before this rebase). */
  commitOid: string;
  /** Parent change ids in order; `[]` or `[ROOT_CHANGE_ID]` for a change on the virtual root. */
  parentChangeIds: readonly string[];
}

/** Every change that may need rebasing, by change id (the virtual root need not be listed). */
export type ChangeGraph = ReadonlyMap<string, ChangeGraphNode>;

export interface CommitWriter {
  /** The committer of every rewritten commit (authors are kept). */
  committer: Person;
  committedAt: Date;
}

export interface RebasedChange {
  changeId: string;
  oldCommitOid: string;
  newCommitOid: string;
  isConflicted: boolean;
  conflicts: PathConflict[];
}

/**
 * The merged tree set of a list of parent commits (jj's `merge_commit_trees`): no parent → the
 * empty tree; one → its tree set; more → each further parent merged in with the merge of the
 * earlier parents' merge bases as the base. The result may be conflicted.
 */
export function mergeParentTrees(store: ObjectStore, parents: readonly string[]): TreeSet {
  if (parents.length === 0) {
    writeEmptyTree(store);
    return [EMPTY_TREE_OID];
  }
  let merged = treeSetOfCommit(readCommit(store, parents[0]!));
  for (let i = 1; i < parents.length; i++) {
    const base = mergeParentTrees(store, mergeBases(store, parents.slice(0, i), [parents[i]!]));
    merged = mergeTreeSets(store, base, merged, treeSetOfCommit(readCommit(store, parents[i]!))).trees;
  }
  return merged;
}

/** Three-way merge of two commits with their merge base(s) as base (a merge commit's tree). */
export function mergeCommitTrees(store: ObjectStore, targetOid: string, sourceOid: string): TreeMergeResult {
  const base = mergeParentTrees(store, mergeBases(store, [targetOid], [sourceOid]));
  const target = treeSetOfCommit(readCommit(store, targetOid));
  const source = treeSetOfCommit(readCommit(store, sourceOid));
  return mergeTreeSets(store, base, target, source);
}

/** Descendants of the rewritten changes (not the rewritten ones themselves), parents first. */
function descendantsInOrder(graph: ChangeGraph, rewritten: ReadonlyMap<string, string>): string[] {
  const children = new Map<string, string[]>();
  for (const [id, node] of graph) {
    for (const parent of node.parentChangeIds) {
      let list = children.get(parent);
      if (!list) children.set(parent, (list = []));
      list.push(id);
    }
  }
  const seeds = [...graph].filter(([, node]) => rewritten.has(node.commitOid)).map(([id]) => id);
  const isSeed = new Set(seeds);
  const reached = new Set<string>();
  const stack = [...seeds];
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      if (!reached.has(child)) {
        reached.add(child);
        stack.push(child);
      }
    }
  }
  // A rewritten change reached from another one keeps the commit its caller gave it.
  const todo = [...reached].filter((id) => !isSeed.has(id)).sort();
  const inTodo = new Set(todo);
  // Kahn's algorithm over the descendants (iterative: chains may be long).
  const pending = new Map(todo.map((id) => [id, graph.get(id)!.parentChangeIds.filter((p) => inTodo.has(p)).length]));
  const ready = todo.filter((id) => pending.get(id) === 0);
  const order: string[] = [];
  while (ready.length > 0) {
    const id = ready.shift()!;
    order.push(id);
    for (const child of children.get(id) ?? []) {
      if (!inTodo.has(child)) continue;
      const left = pending.get(child)! - 1;
      pending.set(child, left);
      if (left === 0) ready.push(child);
    }
  }
  if (order.length !== todo.length) throw new VcsError('corrupt', 'the change graph has a cycle');
  return order;
}

/**
 * Rebases every descendant of the rewritten commits (`rewritten`: old commit oid → new commit
 * oid) onto the new commits, parents first, and returns what was rewritten in that order.
 * Authors, author times, descriptions and change ids are kept; the committer is `writer`.
 */
export function rebaseDescendants(
  store: ObjectStore,
  graph: ChangeGraph,
  rewritten: ReadonlyMap<string, string>,
  writer: CommitWriter,
): RebasedChange[] {
  const newCommitOf = new Map(rewritten);
  const results: RebasedChange[] = [];
  for (const changeId of descendantsInOrder(graph, rewritten)) {
    const node = graph.get(changeId)!;
    const newParents = node.parentChangeIds
      .filter((p) => p !== ROOT_CHANGE_ID)
      .map((p) => {
        const parent = graph.get(p);
        if (!parent) throw new VcsError('corrupt', `change ${changeId} has an unknown parent ${p}`);
        return newCommitOf.get(parent.commitOid) ?? parent.commitOid;
      });
    const old = readCommit(store, node.commitOid);
    const merged = mergeTreeSets(
      store,
      mergeParentTrees(store, old.parents),
      mergeParentTrees(store, newParents),
      treeSetOfCommit(old),
    );
    const newCommitOid = rewriteCommit(store, node.commitOid, {
      parents: newParents,
      trees: merged.trees,
      committer: writer.committer,
      committedAt: writer.committedAt,
    });
    newCommitOf.set(node.commitOid, newCommitOid);
    results.push({
      changeId,
      oldCommitOid: node.commitOid,
      newCommitOid,
      isConflicted: merged.isConflicted,
      conflicts: merged.conflicts,
    });
  }
  return results;
}
