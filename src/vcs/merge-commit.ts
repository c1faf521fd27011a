/**
 * The merge change of a bookmark merge (spec §6.4): a commit whose parents are the target and the
 * source (always a merge commit, even when a fast-forward would do: the jj model) and whose tree
 * is the three-way merge of the two with their merge base as base. Deciding "no_op" (the source
 * is already in the target's history: `isAncestor(source, target)`) is the caller's, before this.
 */
import { VcsError } from './errors.js';
import type { ObjectStore } from './object-store.js';
import { writeChangeCommit } from './commit.js';
import type { CommitAuthorship } from './commit.js';
import type { TreeSet } from './conflict-layout.js';
import { mergeConflictDetails, resolveConflicts } from './conflict.js';
import type { ConflictResolution } from './conflict.js';
import { mergeCommitTrees } from './rebase.js';
import type { PathConflict } from './tree-merge.js';

export interface MergeCommitInput extends CommitAuthorship {
  targetCommitOid: string;
  sourceCommitOid: string;
  /** Applied to the merge's conflicts before deciding whether it is conflicted. */
  resolutions?: readonly ConflictResolution[];
  /** Save a conflicted merge instead of refusing it with a `conflict` error. */
  allowConflicted?: boolean;
}

export interface MergeCommitResult {
  commitOid: string;
  trees: TreeSet;
  isConflicted: boolean;
  conflicts: PathConflict[];
}

/**
 * Writes the merge commit. Conflicts left after `resolutions` without `allowConflicted` →
 * a `conflict` error with `details.conflict_paths` and `details.conflicts` (nothing is referenced
 * yet, so the objects written so far are garbage the caller's transaction may drop).
 */
export function createMergeCommit(store: ObjectStore, input: MergeCommitInput): MergeCommitResult {
  let merged = mergeCommitTrees(store, input.targetCommitOid, input.sourceCommitOid);
  if (input.resolutions && input.resolutions.length > 0) merged = resolveConflicts(store, merged.trees, input.resolutions);
  if (merged.isConflicted && !input.allowConflicted) {
    throw new VcsError(
      'conflict',
      `merging ${input.sourceCommitOid} into ${input.targetCommitOid} conflicts in ${merged.conflicts.length} path(s)`,
      mergeConflictDetails(store, merged.conflicts),
    );
  }
  const commitOid = writeChangeCommit(store, {
    trees: merged.trees,
    parents: [input.targetCommitOid, input.sourceCommitOid],
    changeId: input.changeId,
    authors: input.authors,
    authoredAt: input.authoredAt,
    committer: input.committer,
    committedAt: input.committedAt,
    description: input.description,
    attribution: input.attribution ?? null,
  });
  return { commitOid, trees: merged.trees, isConflicted: merged.isConflicted, conflicts: merged.conflicts };
}
