import { notFound } from '../../errors.js';
import { changeView, type ChangeDetailView } from '../../protocol/views/change.js';
import { readChangeCommit } from '../../vcs/commit.js';
import { materializeTreeSet } from '../../vcs/conflict.js';
import { EMPTY_TREE_OID } from '../../vcs/git-object.js';
import { ROOT_CHANGE_ID } from '../../vcs/ids.js';
import { diffTreesWithin } from '../../vcs/tree-diff.js';
import { listTreeSetConflicts } from '../../vcs/tree-merge.js';
import { getChange, objectStore } from '../change-store.js';
import type { Storage } from '../database.js';
import type { ChangeRecord } from '../records.js';

/**
 * `GET …/changes/{change_id}` (API §5.1): the change with `files` (changed against its first
 * parent, both materialized) and `conflicts`. Its cost grows with the trees it compares (a
 * repository's first import lists every file): the front end answers a change whose walk stays
 * small (`changeDetailWithin`), the read pool the rest (actors/read-tasks.ts), from one snapshot.
 */
export function changeDetail(storage: Storage, repoId: string, changeId: string): ChangeDetailView {
  const record = getChange(storage.meta, repoId, changeId);
  if (!record) throw notFound('CHANGE_NOT_FOUND', `change ${changeId} not found`, { change_id: changeId });
  return changeDetailWithin(storage, repoId, record, Infinity)!;
}

/**
 * The same for `record`, or null when it is conflicted (materializing is left to the pool) or
 * its walk reads more than `maxTreeBytes` of trees.
 */
export function changeDetailWithin(storage: Storage, repoId: string, record: ChangeRecord, maxTreeBytes: number): ChangeDetailView | null {
  // Scratch store: materializing a conflict writes marker files, which must not be persisted here.
  const store = objectStore(storage, repoId, { scratch: true });
  const commit = readChangeCommit(store, record.commit_oid);
  if (commit.isConflicted && maxTreeBytes !== Infinity) return null;
  const first = record.parents[0];
  const parent = first === undefined || first === ROOT_CHANGE_ID ? undefined : getChange(storage.meta, repoId, first);
  const parentCommit = parent ? readChangeCommit(store, parent.commit_oid) : null;
  if (parentCommit?.isConflicted && maxTreeBytes !== Infinity) return null;
  const before = parentCommit ? materializeTreeSet(store, parentCommit.trees) : EMPTY_TREE_OID;
  const after = materializeTreeSet(store, commit.trees);
  const changed = diffTreesWithin(store, before, after, maxTreeBytes);
  if (!changed) return null;
  return {
    ...changeView(record, commit),
    files: changed.map((c) => c.path),
    conflicts: commit.isConflicted ? listTreeSetConflicts(store, commit.trees).map((c) => c.path) : [],
  };
}
