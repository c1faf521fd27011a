import { isChangeAncestor, insertChange, reparentChange } from './change-graph.js';
import { changeCommitView, writeChangeCommit, type Attribution, type ChangeCommitView, type Person } from './commit.js';
import type { TreeSet } from './conflict-layout.js';
import { VcsError } from './errors.js';
import { readCommit } from './git-object.js';
import { ROOT_CHANGE_ID, isChangeId, newChangeId } from './ids.js';
import type { ObjectStore } from './object-store.js';
import { rebaseDescendants, type ChangeGraphNode, type RebasedChange } from './rebase.js';
import type { BookmarkRecord, ChangeRecord, RepoStore } from './repo-store.js';
import { writeEmptyTree } from './tree-edit.js';

/**
 * `move`: the bookmark must exist; `create`: it must not; `upsert`: created when missing, moved
 * otherwise.
 */
export type BookmarkWriteMode = 'move' | 'create' | 'upsert';

export interface BookmarkMove {
  name: string;
  change_id: string;
  allow_backwards?: boolean | null;
  /** Guard: the bookmark's current target; a mismatch is a `stale` error. */
  expected_change_id?: string | null;
  mode?: BookmarkWriteMode;
}

export interface BookmarkWrite {
  record: BookmarkRecord;
  /** null when the bookmark was created. */
  from_change_id: string | null;
  created: boolean;
}

export interface NewChangeInput {
  /** A new id unless given (sync imports keep the commit's change id). */
  changeId?: string;
  /** Parent change ids; `[ROOT_CHANGE_ID]` for a change on the virtual root. */
  parents: string[];
  trees: TreeSet;
  authors: Person[];
  authoredAt: Date;
  committer?: Person;
  description: string;
  attribution?: Attribution | null;
}

export interface EvolveInput {
  trees: TreeSet;
  /** Omitted: kept (with their author time). */
  authors?: Person[];
  authoredAt?: Date;
  /** Omitted: kept. */
  description?: string;
  /** Omitted: kept. */
  attribution?: Attribution | null;
  /** Omitted: the transaction's committer. */
  committer?: Person;
}

export interface EvolveResult {
  /** null when nothing changed (no new commit was written). */
  previousCommitOid: string | null;
  record: ChangeRecord;
  rebased: RebasedChange[];
}

export interface TransactionOptions {
  now: Date;
  /** Committer of the commits the transaction writes unless told otherwise (rebases included). */
  committer: Person;
  /** Recorded as `rebased_at_seq` on the changes it rebases: the writer's arrival order. */
  seq: number;
}

/**
 * One repository write, like jj's `Transaction` over a `MutableRepo`: the change graph's rules over
 * a `RepoStore` and an `ObjectStore`. Its caller provides the atomicity (an LMDB child
 * transaction): nothing here is undone by hand.
 *
 * Invariants it keeps: a change's commit always has its parents' current commits as parents
 * (evolving a change rebases every descendant in the same operation); every commit written is
 * indexed and kept; each rewritten change gets an evolution entry under the operation that
 * `commit` records; a bookmark moves only forward in history unless told otherwise, all moves of
 * one call or none.
 *
 * A subclass hears of what it writes through the `on…` methods (events, in order), called once
 * each record is stored.
 */
export class RepoTransaction {
  private readonly pendingEvolution: Array<{ changeId: string; commitOid: string; predecessorOid: string | null }> = [];
  private readonly commits = new Map<string, ChangeCommitView>();
  /** Change records read or written by this transaction (it is the only writer meanwhile). */
  private readonly records = new Map<string, ChangeRecord>();
  /** Changes this transaction rebased. */
  readonly rebasedIds: string[] = [];
  protected readonly nowIso: string;

  constructor(
    readonly graph: RepoStore,
    readonly objects: ObjectStore,
    protected readonly options: TransactionOptions,
  ) {
    this.nowIso = options.now.toISOString();
  }

  protected onChangeCreated(_record: ChangeRecord): void {}
  protected onChangeEvolved(_record: ChangeRecord, _previousCommitOid: string): void {}

  /** A change of this repository; a `change-not-found` error otherwise (the virtual root is not a change). */
  change(changeId: string): ChangeRecord {
    const record = this.findChange(changeId);
    if (!record) throw new VcsError('change-not-found', `change ${changeId} not found`, { change_id: changeId });
    return record;
  }

  private load(changeId: string): ChangeRecord | undefined {
    if (!isChangeId(changeId)) throw new VcsError('invalid-request', `"${changeId}" is not a change id`);
    const record = changeId === ROOT_CHANGE_ID ? undefined : this.graph.change(changeId);
    if (record) this.records.set(changeId, record);
    return record;
  }

  /** The change, or null for the virtual root; `change-not-found` for anything else unknown. */
  changeOrRoot(changeId: string): ChangeRecord | null {
    if (changeId === ROOT_CHANGE_ID) return null;
    return this.change(changeId);
  }

  /** The change a commit of this repository belongs to (any commit it has had), if any. */
  changeOfCommit(oid: string): string | undefined {
    return this.graph.changeOfCommit(oid);
  }

  /** True when `ancestorId` is `descendantId` or one of its ancestors. */
  isAncestor(ancestorId: string, descendantId: string): boolean {
    return isChangeAncestor(this.graph, ancestorId, descendantId);
  }

  /** A change of this repository, or undefined (the virtual root is not a change). */
  findChange(changeId: string): ChangeRecord | undefined {
    return this.records.get(changeId) ?? this.load(changeId);
  }

  bookmark(name: string): BookmarkRecord | undefined {
    return this.graph.bookmark(name);
  }

  /** A bookmark of this repository; a `bookmark-not-found` error otherwise. */
  existingBookmark(name: string): BookmarkRecord {
    const record = this.graph.bookmark(name);
    if (!record) throw new VcsError('bookmark-not-found', `bookmark "${name}" not found`, { bookmark: name });
    return record;
  }

  /** Removes a bookmark and returns what it was; `bookmark-not-found` when there is none. */
  removeBookmark(name: string): BookmarkRecord {
    const record = this.existingBookmark(name);
    this.graph.removeBookmark(name);
    return record;
  }

  commit(oid: string): ChangeCommitView {
    let view = this.commits.get(oid);
    if (!view) this.commits.set(oid, (view = changeCommitView(oid, readCommit(this.objects, oid))));
    return view;
  }

  /** The tree set of a change (the empty tree for the virtual root). */
  treesOf(record: ChangeRecord | null): TreeSet {
    if (!record) return [writeEmptyTree(this.objects)];
    return this.commit(record.commit_oid).trees;
  }

  private parentCommits(parents: readonly string[]): string[] {
    return parents.filter((p) => p !== ROOT_CHANGE_ID).map((p) => this.change(p).commit_oid);
  }

  private generationUnder(parents: readonly string[]): number {
    let generation = 1;
    for (const p of parents) if (p !== ROOT_CHANGE_ID) generation = Math.max(generation, this.change(p).generation + 1);
    return generation;
  }

  /** Writes a new change (commit, record, indexes). */
  createChange(input: NewChangeInput): ChangeRecord {
    const changeId = input.changeId ?? this.newChangeId();
    const parents = input.parents.length > 0 ? [...input.parents] : [ROOT_CHANGE_ID];
    const generation = this.generationUnder(parents);
    const commitOid = writeChangeCommit(this.objects, {
      trees: input.trees,
      parents: this.parentCommits(parents),
      changeId,
      authors: input.authors,
      authoredAt: input.authoredAt,
      committer: input.committer ?? this.options.committer,
      committedAt: this.options.now,
      description: input.description,
      attribution: input.attribution ?? null,
    });
    return this.inserted(changeId, commitOid, parents, input.trees.length > 1, generation);
  }

  /** A new change for a commit that arrived whole (a git push, API §14): the commit is kept as it is. */
  adoptNewChange(changeId: string, commitOid: string, parents: string[], isConflicted: boolean): ChangeRecord {
    return this.inserted(changeId, commitOid, parents, isConflicted, this.generationUnder(parents));
  }

  private inserted(changeId: string, commitOid: string, parents: string[], isConflicted: boolean, generation: number): ChangeRecord {
    const record = insertChange(
      this.graph,
      { id: changeId, commit_oid: commitOid, parents, created_at: this.nowIso, updated_at: this.nowIso, rebased_at_seq: null, is_conflicted: isConflicted },
      generation,
    );
    this.records.set(changeId, record);
    this.pendingEvolution.push({ changeId, commitOid, predecessorOid: null });
    this.onChangeCreated(record);
    return record;
  }

  /**
   * Evolves a change: a new commit with the same change id and parents, then every descendant
   * rebased onto it (parents first; a rebase that conflicts leaves that descendant conflicted).
   * Nothing is written when the new commit would say exactly what the current one says.
   */
  evolveChange(record: ChangeRecord, input: EvolveInput): EvolveResult {
    const old = this.commit(record.commit_oid);
    const description = input.description ?? old.message;
    const authors = input.authors ?? old.authors;
    const authoredAt = input.authoredAt ?? (input.authors ? this.options.now : new Date(old.authoredAt));
    const attribution = input.attribution === undefined ? { provider: old.aiProvider, model: old.aiModel } : input.attribution;
    const same =
      input.trees.length === old.trees.length &&
      input.trees.every((t, i) => t === old.trees[i]) &&
      description === old.message &&
      sameAuthors(authors, old.authors) &&
      authoredAt.getTime() === new Date(old.authoredAt).getTime() &&
      (attribution?.provider ?? null) === old.aiProvider &&
      (attribution?.model ?? null) === old.aiModel;
    if (same) return { previousCommitOid: null, record, rebased: [] };

    const commitOid = writeChangeCommit(this.objects, {
      trees: input.trees,
      parents: this.parentCommits(record.parents),
      changeId: record.id,
      authors,
      authoredAt,
      committer: input.committer ?? this.options.committer,
      committedAt: this.options.now,
      description,
      attribution,
    });
    const previous = record.commit_oid;
    const updated: ChangeRecord = { ...record, commit_oid: commitOid, is_conflicted: input.trees.length > 1, updated_at: this.nowIso };
    this.graph.putChange(updated);
    this.records.set(updated.id, updated);
    this.pendingEvolution.push({ changeId: record.id, commitOid, predecessorOid: previous });
    this.onChangeEvolved(updated, previous);
    const rebased = this.rebaseDescendantsOf(new Map([[record.id, { old: previous, new: commitOid }]]));
    return { previousCommitOid: previous, record: updated, rebased };
  }

  /**
   * A change's next commit that arrived whole (a git push, API §14): kept as it is, parents
   * included, so the change moves when the commit has other parents (`parents`: their change
   * ids). Its descendants are not rebased here: the caller does that once every pushed commit is
   * in (`rebaseDescendantsOf`), so that what the push itself rewrote is not rebased first.
   */
  adoptCommit(record: ChangeRecord, commitOid: string, parents: string[], isConflicted: boolean): ChangeRecord {
    const previous = record.commit_oid;
    const next: ChangeRecord = { ...record, commit_oid: commitOid, parents, is_conflicted: isConflicted, updated_at: this.nowIso };
    let updated = next;
    const moved = parents.length !== record.parents.length || parents.some((p, i) => p !== record.parents[i]);
    if (moved) {
      for (const rewritten of reparentChange(this.graph, next, record.parents)) this.records.set(rewritten.id, rewritten);
      updated = this.records.get(record.id)!;
    } else {
      this.graph.putChange(next);
      this.records.set(next.id, next);
    }
    this.pendingEvolution.push({ changeId: record.id, commitOid, predecessorOid: previous });
    this.onChangeEvolved(updated, previous);
    return updated;
  }

  /**
   * Rebases every descendant of changes whose commits were rewritten (`rewritten`: change id →
   * old and new commit), recording each. Callers that rewrite commits themselves (imports,
   * merges) use it directly; `evolveChange` calls it.
   */
  rebaseDescendantsOf(rewritten: ReadonlyMap<string, { old: string; new: string }>): RebasedChange[] {
    const graph = new Map<string, ChangeGraphNode>();
    const node = (id: string): void => {
      if (graph.has(id) || id === ROOT_CHANGE_ID) return;
      const seed = rewritten.get(id);
      const record = this.change(id);
      graph.set(id, { commitOid: seed ? seed.old : record.commit_oid, parentChangeIds: record.parents });
    };
    const stack = [...rewritten.keys()];
    const seen = new Set(stack);
    for (const id of stack) node(id);
    while (stack.length > 0) {
      for (const child of this.graph.children(stack.pop()!)) {
        if (seen.has(child)) continue;
        seen.add(child);
        stack.push(child);
        node(child);
        // A merge's other parents must be in the graph too (their commits do not move).
        for (const parent of this.change(child).parents) node(parent);
      }
    }
    if (graph.size === rewritten.size) return [];
    const commitMap = new Map([...rewritten.values()].map((r) => [r.old, r.new]));
    const results = rebaseDescendants(this.objects, graph, commitMap, { committer: this.options.committer, committedAt: this.options.now });
    for (const result of results) {
      const record = this.change(result.changeId);
      const updated: ChangeRecord = {
        ...record,
        commit_oid: result.newCommitOid,
        is_conflicted: result.isConflicted,
        updated_at: this.nowIso,
        rebased_at_seq: this.options.seq,
      };
      this.graph.putChange(updated);
      this.records.set(updated.id, updated);
      this.rebasedIds.push(updated.id);
      this.pendingEvolution.push({ changeId: updated.id, commitOid: result.newCommitOid, predecessorOid: result.oldCommitOid });
      this.onChangeEvolved(updated, result.oldCommitOid);
    }
    return results;
  }

  /**
   * Creates or moves bookmarks atomically (API §6.2, §6.3): every move is checked before any is
   * applied. A move must advance history (the new target descends from or equals the old one)
   * unless `allow_backwards`; all refused names are reported together in `details.bookmark_names`
   * (`history-rewrite`). `expected_change_id` guards against a concurrent move (`stale`).
   */
  moveBookmarks(moves: readonly BookmarkMove[]): BookmarkWrite[] {
    const names = new Set<string>();
    const refused: string[] = [];
    const plan: Array<{ move: BookmarkMove; existing: BookmarkRecord | undefined }> = [];
    for (const move of moves) {
      if (names.has(move.name)) throw new VcsError('invalid-request', `bookmark "${move.name}" is named twice`);
      names.add(move.name);
      this.changeOrRoot(move.change_id);
      const existing = this.graph.bookmark(move.name);
      const mode = move.mode ?? 'move';
      if (!existing && mode === 'move') throw new VcsError('bookmark-not-found', `bookmark "${move.name}" not found`, { bookmark: move.name });
      if (existing && mode === 'create') throw new VcsError('bookmark-exists', `bookmark "${move.name}" already exists`, { bookmark: move.name });
      if (move.expected_change_id != null && (existing?.change_id ?? null) !== move.expected_change_id) {
        throw new VcsError('stale', `bookmark "${move.name}" no longer points at ${move.expected_change_id}`, {
          bookmark: move.name,
          change_id: existing?.change_id ?? null,
        });
      }
      if (existing && !move.allow_backwards && !isChangeAncestor(this.graph, existing.change_id, move.change_id)) refused.push(move.name);
      plan.push({ move, existing });
    }
    if (refused.length > 0) {
      throw new VcsError('history-rewrite', `moving ${refused.map((n) => `"${n}"`).join(', ')} would not advance history (set allow_backwards to force)`, {
        bookmark_names: refused,
      });
    }
    return plan.map(({ move, existing }) => {
      const record: BookmarkRecord = existing
        ? { ...existing, change_id: move.change_id, updated_at: existing.change_id === move.change_id ? existing.updated_at : this.nowIso }
        : { name: move.name, change_id: move.change_id, created_at: this.nowIso, updated_at: this.nowIso };
      if (!existing || existing.change_id !== move.change_id) this.graph.putBookmark(record);
      return { record, from_change_id: existing?.change_id ?? null, created: !existing };
    });
  }

  /**
   * API §4.2: whether a change created on `baseId` is the repository's first write — on the
   * virtual root of a repository without changes whose default bookmark is still at the root.
   */
  isFirstWrite(baseId: string, defaultBookmark: string): boolean {
    if (baseId !== ROOT_CHANGE_ID) return false;
    if (this.graph.bookmark(defaultBookmark)?.change_id !== ROOT_CHANGE_ID) return false;
    return !this.graph.hasChanges();
  }

  /** A fresh change id this repository has not used (16 random bytes: a clash is theoretical). */
  newChangeId(): string {
    for (;;) {
      const id = newChangeId();
      if (!this.records.has(id) && !this.graph.change(id)) return id;
    }
  }

  /** Records the evolution entries of everything written so far under the operation `operationId`. */
  recordEvolution(operationId: string): void {
    const at = this.options.now.getTime();
    for (const entry of this.pendingEvolution) {
      this.graph.appendEvolution(
        entry.changeId,
        { commit_oid: entry.commitOid, predecessor_oid: entry.predecessorOid, operation_id: operationId, created_at: this.nowIso },
        at,
      );
    }
    this.pendingEvolution.length = 0;
  }
}

function sameAuthors(a: readonly Person[], b: readonly Person[]): boolean {
  return a.length === b.length && a.every((p, i) => p.name === b[i]!.name && (p.email ?? '') === (b[i]!.email ?? ''));
}
