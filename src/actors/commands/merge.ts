import { ServiceError, invalid } from '../../errors.js';
import { bookmarkEventView } from '../../protocol/views/bookmark.js';
import { NULL_OID } from '../../vcs/ids.js';
import { mergeConflictDetails, resolveConflicts } from '../../vcs/conflict.js';
import { mergeCommitTrees } from '../../vcs/rebase.js';
import { listTreeSetConflicts, type TreeMergeResult } from '../../vcs/tree-merge.js';
import { defineCommand } from '../command.js';
import { RepoWrite } from './repo-writes.js';
import type { MergeBody } from '../../protocol/schemas/bookmarks.js';

/**
 * Merging one bookmark into another (API §6.4, §6.5). Unless the source is already in the
 * target's history (a no-op that writes nothing), the result is always a new merge change whose
 * parents are the target's and the source's changes — the jj model, even where a fast-forward
 * would do — and the target bookmark moves to it. Everything (commit, change, bookmark moves,
 * source deletion, events, operation) commits in the command's one transaction, or nothing does:
 * a refused merge (MERGE_CONFLICT) leaves no trace.
 */

/** The body of `POST …/bookmarks/merge` (omitted `message` → `Merge bookmark 'source' into 'target'`; `""` → no description). */
export type MergeBookmarksInput = MergeBody & { repo_id: string };

export interface MergeResultView {
  merge_type: 'merge_commit' | 'no_op';
  is_conflicted: boolean;
  commit_oid: string;
  change_id: string;
  target: string;
  source: string;
  source_deleted: boolean;
}

export const mergeBookmarks = defineCommand<MergeBookmarksInput>('bookmark.merge', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id);
  const target = w.existingBookmark(input.target);
  const source = w.existingBookmark(input.source);
  const targetChange = w.changeOrRoot(target.change_id);
  const sourceChange = w.changeOrRoot(source.change_id);

  if (w.isAncestor(source.change_id, target.change_id)) {
    const body: MergeResultView = {
      merge_type: 'no_op',
      is_conflicted: targetChange?.is_conflicted ?? false,
      commit_oid: targetChange?.commit_oid ?? NULL_OID,
      change_id: target.change_id,
      target: target.name,
      source: source.name,
      source_deleted: false,
    };
    return { status: 200, body, schema: 'mergeResult' };
  }
  if (input.delete_source && source.name === w.repo.default_bookmark) {
    throw invalid(`"${source.name}" is the default bookmark and cannot be deleted by the merge; change the default bookmark first`);
  }

  // A target still at the virtual root contributes nothing: the merge's content is the source's.
  let merged: Pick<TreeMergeResult, 'trees' | 'isConflicted' | 'conflicts'> = targetChange
    ? mergeCommitTrees(w.store, targetChange.commit_oid, sourceChange!.commit_oid)
    : { trees: w.treesOf(sourceChange), isConflicted: sourceChange!.is_conflicted, conflicts: listTreeSetConflicts(w.store, w.treesOf(sourceChange)) };
  if (input.resolutions && input.resolutions.length > 0) merged = resolveConflicts(w.store, merged.trees, input.resolutions);
  if (merged.isConflicted && !input.allow_conflicted) {
    const details = mergeConflictDetails(w.store, merged.conflicts);
    throw new ServiceError(
      'MERGE_CONFLICT',
      `merging "${source.name}" into "${target.name}" conflicts in ${details.conflict_paths.length} path(s); resolve them or pass allow_conflicted`,
      details,
    );
  }

  const { authors, authoredAt } = w.newChangeAuthors(input);
  const change = w.createChange({
    parents: [target.change_id, source.change_id],
    trees: merged.trees,
    authors,
    authoredAt,
    description: input.message ?? `Merge bookmark '${source.name}' into '${target.name}'`,
  });
  // The merge descends from the target, so this move always advances history.
  const [moved] = w.moveBookmarks([{ name: target.name, change_id: change.id }], { emitEvents: false });
  ctx.mutation.emit('bookmark.merged', w.org, w.repo, { bookmark: bookmarkEventView(w.repo, moved!.record, change.commit_oid) });
  const sourceDeleted = input.delete_source === true;
  if (sourceDeleted) w.deleteBookmark(source.name);
  w.finish('bookmark.merge', {
    target: target.name,
    source: source.name,
    change_id: change.id,
    commit_oid: change.commit_oid,
    is_conflicted: change.is_conflicted,
    source_deleted: sourceDeleted,
  });
  const body: MergeResultView = {
    merge_type: 'merge_commit',
    is_conflicted: change.is_conflicted,
    commit_oid: change.commit_oid,
    change_id: change.id,
    target: target.name,
    source: source.name,
    source_deleted: sourceDeleted,
  };
  return { status: 200, body, schema: 'mergeResult' };
});
