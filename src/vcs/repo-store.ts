/**
 * The storage interface of a repository's change graph (like jj's operation and view stores beside
 * its `Backend`): changes, their children, bookmarks, evolution entries and operations of ONE
 * repository. It is synchronous for the same reason as `ObjectStore`: a repository's writes apply
 * inside one write transaction. src/storage implements it over LMDB; `MemoryRepoStore` in memory.
 */

/**
 * A change (API §5): a stable id whose current commit moves as it evolves. Parents are change ids
 * (the virtual root is `'z' × 32`) and never change after creation except when a pushed commit
 * moves the change: rebases move the commits under them, not the graph.
 */
export interface ChangeRecord {
  id: string;
  commit_oid: string;
  parents: string[];
  created_at: string;
  updated_at: string;
  /** Worker seq of the command whose ancestor evolve last rebased this change (pending-write rule). */
  rebased_at_seq: number | null;
  is_conflicted: boolean;
  /** 1 + the largest parent generation (the root is 0): orders change lists topologically. */
  generation: number;
}

export interface BookmarkRecord {
  name: string;
  change_id: string;
  created_at: string;
  updated_at: string;
}

/** One commit a change has had (`GET …/changes/{id}/evolution`). */
export interface EvolutionRecord {
  commit_oid: string;
  predecessor_oid: string | null;
  operation_id: string;
  created_at: string;
}

export interface OperationRecord {
  id: string;
  repo_id: string;
  parent: string | null;
  kind: string;
  key_id: string | null;
  at: string;
  /** A short machine-readable account of what changed (ids, names), never secrets. */
  summary: Record<string, unknown>;
}

export interface RepoStore {
  change(changeId: string): ChangeRecord | undefined;
  /** Stores a change's state and indexes its commit as one of the change's (commits are kept forever). */
  putChange(record: ChangeRecord): void;
  /** The change a commit of this repository belongs to (any commit it has had). */
  changeOfCommit(oid: string): string | undefined;
  /** True when the repository has at least one change. */
  hasChanges(): boolean;
  /** Ids of the changes that name `changeId` as a parent. */
  children(changeId: string): string[];
  addChild(parentId: string, childId: string): void;
  removeChild(parentId: string, childId: string): void;
  bookmark(name: string): BookmarkRecord | undefined;
  putBookmark(record: BookmarkRecord): void;
  removeBookmark(name: string): void;
  /** Appends an entry to a change's evolution; `at` (ms) orders entries of the same change. */
  appendEvolution(changeId: string, record: EvolutionRecord, at: number): void;
  putOperation(record: OperationRecord): void;
}
