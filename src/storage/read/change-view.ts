/**
 * What the API reads of a change (spec §5.2): the change's materialized tree. A clean commit's
 * view is its tree; a conflicted commit's view is its first side with conflicted text files
 * replaced by diff3 markers and the jj layout hidden (`materializeTreeSet`). Materializing
 * writes derived objects, which on the read path go to an in-memory overlay, never to LMDB; the
 * result is kept per commit in a small LRU per thread (commits never change, so it never goes
 * stale) and can be shipped to another thread as plain data.
 */
import { ServiceError } from '../../errors.js';
import { EMPTY_TREE_OID, readCommit } from '../../vcs/git-object.js';
import type { GitObject } from '../../vcs/object-store.js';
import { ROOT_CHANGE_ID, isChangeId } from '../../vcs/ids.js';
import { MemoryObjectStore } from '../../vcs/memory-object-store.js';
import { materializeTreeSet } from '../../vcs/conflict.js';
import { treeSetOfCommit } from '../../vcs/conflict-layout.js';
import { listTreeSetConflicts, type PathConflict } from '../../vcs/tree-merge.js';
import type { Storage } from '../database.js';
import { getChange } from '../change-store.js';
import { LayeredObjectStore } from './layered-object-store.js';
import { ReadObjectStore } from './repo-objects.js';
import { LruCache } from './lru-cache.js';
import type { RecordReader } from './record-cache.js';

/** A change pinned to the commit it had when the request resolved it (null: the virtual root). */
export interface ChangeRef {
  changeId: string;
  commitOid: string | null;
}

/** The materialized view of a conflicted commit: its root tree and the objects that make it. */
export interface MaterializedView {
  treeOid: string;
  objects: MemoryObjectStore;
  conflicts: PathConflict[];
}

export interface ChangeView {
  repoId: string;
  ref: ChangeRef;
  isConflicted: boolean;
  /** Root tree of the materialized view. */
  treeOid: string;
  /** Reads the view: the repository's objects plus the materialized ones. */
  store: LayeredObjectStore;
  /** The objects materializing made (null for a clean commit). */
  materialized: MemoryObjectStore | null;
  conflicts: readonly PathConflict[];
  conflictPaths: ReadonlySet<string>;
}

/** Resolves a change id of the repository (the virtual root included); unknown → 404. */
export function resolveChange(meta: RecordReader, repoId: string, changeId: string, what = 'change'): ChangeRef {
  if (!isChangeId(changeId)) throw new ServiceError('INVALID_REQUEST', `${what} must be a change id (32 letters k–z)`, { change_id: changeId });
  if (changeId === ROOT_CHANGE_ID) return { changeId, commitOid: null };
  const change = getChange(meta, repoId, changeId);
  if (!change) throw new ServiceError('CHANGE_NOT_FOUND', `change ${changeId} not found`, { change_id: changeId });
  return { changeId, commitOid: change.commit_oid };
}

// ---- the per-thread cache of materialized views ---------------------------------------------

function overlayBytes(view: MaterializedView): number {
  let bytes = 0;
  for (const [, object] of view.objects.entries()) bytes += object.content.length + 64;
  return bytes;
}

const cache = new LruCache<MaterializedView>(128, 32 * 1024 * 1024, overlayBytes);
/** The tree set of each commit read here (one tree when clean): parsing a commit per read costs more than the lookup. */
const commitTrees = new LruCache<readonly string[]>(50_000, Infinity, () => 0);

/** A materialized view as plain data (for postMessage between threads). */
export interface ShippedView {
  repoId: string;
  commitOid: string;
  treeOid: string;
  objects: Array<[string, GitObject]>;
  conflicts: PathConflict[];
}

export function shipView(repoId: string, commitOid: string, view: MaterializedView): ShippedView {
  return { repoId, commitOid, treeOid: view.treeOid, objects: [...view.objects.entries()], conflicts: view.conflicts };
}

/** Adds a view computed on another thread to this thread's cache, and returns it. */
export function adoptView(shipped: ShippedView): MaterializedView {
  const objects = new MemoryObjectStore();
  for (const [oid, object] of shipped.objects) {
    if (objects.write(object.type, object.content) !== oid) throw new ServiceError('INTERNAL_ERROR', 'a shipped view object does not match its oid');
  }
  const view: MaterializedView = { treeOid: shipped.treeOid, objects, conflicts: shipped.conflicts };
  cache.set(shipped.commitOid, view, shipped.repoId);
  return view;
}

export function materializeCommit(storage: Storage, repoId: string, commitOid: string): MaterializedView {
  const cached = cache.get(commitOid, repoId);
  if (cached) return cached;
  const store = new LayeredObjectStore(new ReadObjectStore(storage, repoId));
  const trees = treeSetOfCommit(readCommit(store, commitOid));
  const treeOid = materializeTreeSet(store, trees);
  const view: MaterializedView = { treeOid, objects: store.overlay, conflicts: listTreeSetConflicts(store, trees) };
  cache.set(commitOid, view, repoId);
  return view;
}

/**
 * The view of a resolved change. A conflicted commit whose view is not cached in this thread is
 * materialized here when `materialize` is true, taken from `materialized` when given (a view
 * computed off this thread, see `adoptView`), and otherwise null is returned.
 */
export function openChangeView(
  storage: Storage,
  repoId: string,
  ref: ChangeRef,
  options: { materialize: boolean; materialized?: MaterializedView },
): ChangeView | null {
  const objects = new ReadObjectStore(storage, repoId);
  const clean = (treeOid: string): ChangeView => ({
    repoId,
    ref,
    isConflicted: false,
    treeOid,
    store: new LayeredObjectStore(objects),
    materialized: null,
    conflicts: [],
    conflictPaths: new Set(),
  });
  if (ref.commitOid === null) return clean(EMPTY_TREE_OID);
  let trees = commitTrees.get(ref.commitOid, repoId);
  if (!trees) commitTrees.set(ref.commitOid, (trees = treeSetOfCommit(readCommit(objects, ref.commitOid))), repoId);
  if (trees.length === 1) return clean(trees[0]!);
  const view = options.materialize ? materializeCommit(storage, repoId, ref.commitOid) : (options.materialized ?? cache.get(ref.commitOid, repoId));
  if (!view) return null;
  return {
    repoId,
    ref,
    isConflicted: true,
    treeOid: view.treeOid,
    store: new LayeredObjectStore(objects, undefined, [view.objects]),
    materialized: view.objects,
    conflicts: view.conflicts,
    conflictPaths: new Set(view.conflicts.map((c) => c.path)),
  };
}
