/**
 * jj's git layout for a conflicted commit (`write_tree_conflict` in jj's `git_backend.rs`):
 * - the commit's root tree is the first side's tree plus, for every term, a subtree
 *   `.jjconflict-base-N` / `.jjconflict-side-N` holding that term's whole tree (so git keeps
 *   them reachable), plus a `JJ-CONFLICT-README` file explaining the layout;
 * - the commit carries `jj:trees <side0> <base0> <side1> …` (the terms in merge order, sides
 *   first), which is what marks the commit as conflicted. Without that header a tree is plain,
 *   whatever its names.
 */
import type { ObjectStore } from './object-store.js';
import { EMPTY_TREE_OID, TREE_MODE, commitHeader, readTree, writeBlob, writeTree } from './git-object.js';
import type { CommitHeader, CommitObject, TreeEntry } from './git-object.js';
import { isCommitOid } from './ids.js';
import type { Merge } from './merge.js';
import { writeEmptyTree } from './tree-edit.js';

export const JJ_TREES_HEADER = 'jj:trees';
export const JJ_CONFLICT_LABELS_HEADER = 'jj:conflict-labels';
export const CHANGE_ID_HEADER = 'change-id';
export const JJ_CONFLICT_README_NAME = 'JJ-CONFLICT-README';
export const JJ_CONFLICT_PREFIX = '.jjconflict';

/** jj's README text, byte for byte, so our conflict trees have the same oids as jj's. */
export const JJ_CONFLICT_README = `This commit was made by jj, https://jj-vcs.dev/.
The commit contains file conflicts, and therefore looks wrong when used with
plain Git or other tools that are unfamiliar with jj.

The .jjconflict-* directories represent the different inputs to the conflict.
For details, see
https://docs.jj-vcs.dev/latest/git-compatibility/#format-mapping-details

If you see this file in your working copy, it probably means that you used a
regular \`git\` command to check out a conflicted commit. Use \`jj abandon\` to
recover.
`;

/** A tree set: one tree oid when clean, or a merge of tree oids (see merge.ts) when conflicted. */
export type TreeSet = Merge<string>;

/** True for the root entries the layout adds (hidden in the materialized view). */
export function isConflictLayoutName(name: string): boolean {
  return name.startsWith(JJ_CONFLICT_PREFIX) || name === JJ_CONFLICT_README_NAME;
}

/**
 * The git root tree for a tree set: the tree itself when clean, else jj's conflict layout
 * (written to the store). Every term tree must already be in the store.
 */
export function writeTreeSet(store: ObjectStore, trees: TreeSet): string {
  if (trees.length % 2 !== 1) throw new Error('a tree set needs an odd number of trees');
  if (trees.length === 1) {
    if (trees[0] === EMPTY_TREE_OID) writeEmptyTree(store);
    return trees[0]!;
  }
  if (trees.includes(EMPTY_TREE_OID)) writeEmptyTree(store);
  const entries: TreeEntry[] = [];
  trees.forEach((oid, i) => {
    const name = i % 2 === 0 ? `${JJ_CONFLICT_PREFIX}-side-${i / 2}` : `${JJ_CONFLICT_PREFIX}-base-${(i - 1) / 2}`;
    entries.push({ name, mode: TREE_MODE, oid });
  });
  entries.push({ name: JJ_CONFLICT_README_NAME, mode: '100644', oid: writeBlob(store, JJ_CONFLICT_README) });
  for (const entry of readTree(store, trees[0]!)) {
    if (!isConflictLayoutName(entry.name)) entries.push(entry);
  }
  return writeTree(store, entries);
}

/** The `jj:trees` header for a tree set, or none when it is clean. */
export function treeSetHeaders(trees: TreeSet): CommitHeader[] {
  return trees.length > 1 ? [{ name: JJ_TREES_HEADER, value: trees.join(' ') }] : [];
}

/**
 * A commit's tree set: the `jj:trees` terms when the header is present and valid (an odd count
 * of at least 3 oids, as jj requires), else the commit's own tree.
 */
export function treeSetOfCommit(commit: CommitObject): TreeSet {
  const header = commitHeader(commit, JJ_TREES_HEADER);
  if (header === undefined) return [commit.tree];
  const oids = header.trim().split(' ');
  if (oids.length < 3 || oids.length % 2 !== 1 || !oids.every(isCommitOid)) return [commit.tree];
  return oids;
}

export function isConflictedCommit(commit: CommitObject): boolean {
  return treeSetOfCommit(commit).length > 1;
}
