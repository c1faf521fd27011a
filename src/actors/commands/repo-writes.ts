import { ServiceError, invalid, notFound } from '../../errors.js';
import { changeCommitView, writeChangeCommit, type Attribution, type ChangeCommitView, type Person } from '../../vcs/commit.js';
import type { TreeSet } from '../../vcs/conflict-layout.js';
import { readCommit } from '../../vcs/git-object.js';
import { NULL_OID, ROOT_CHANGE_ID, isChangeId, newChangeId } from '../../vcs/ids.js';
import { writeEmptyTree } from '../../vcs/tree-edit.js';
import { rebaseDescendants, type ChangeGraphNode, type RebasedChange } from '../../vcs/rebase.js';
import { checkBookmarkName } from '../../protocol/names.js';
import { changeView, type ChangeView } from '../../protocol/views/change.js';
import { bookmarkEventView, bookmarkView, type BookmarkView } from '../../protocol/views/bookmark.js';
import { childrenOf, getChange, isChangeAncestor, isRepositoryEmpty, objectStore, putChange, putEvolution, putNewChange, putReparentedChange } from '../../storage/change-store.js';
import type { LmdbObjectStore } from '../../storage/git-object-store.js';
import { ulid } from '../../storage/ids.js';
import { K } from '../../storage/keys.js';
import { ObjectAccounting, REFERENCE } from '../../storage/object-accounting.js';
import type { BookmarkRecord, ChangeRecord, OrgRecord, RepoRecord } from '../../storage/records.js';
import { getBookmark, getOrg, getRepo } from '../../storage/repo-store.js';
import type { CommandContext } from '../command.js';

/**
 * The write side of a repository's change graph, shared by every command that writes changes or
 * bookmarks (changes, apply-ops, bookmarks, merges, sync imports). A `RepoWrite` lives for one
 * command inside its transaction:
 *
 *   const w = new RepoWrite(ctx, repoId);
 *   const change = w.createChange({...});        // or w.evolveChange(record, {...})
 *   w.moveBookmarks([{ name, change_id }]);      // the §6.2 history rule, all or nothing
 *   const opId = w.finish('kind', summary);      // quota, op-log entry, evolution records, repo record
 *
 * Invariants it keeps: a change's commit always has its parents' current commits as parents
 * (evolving a change rebases every descendant in the same operation); every commit written is
 * indexed and kept; each rewritten change gets an evolution record and a `change.evolved` event;
 * the objects it stores are charged to the org's quota, all or nothing (`finish`).
 */

/**
 * API §5.3 pending writes: a write to a change that was already waiting in the mailbox when an
 * ancestor's evolve rebased that change (same batch, later arrival) is refused with ABORTED —
 * its author saw the change before the rebase. A write that arrived later applies normally.
 */
export function assertNotRebasedWhileWaiting(ctx: CommandContext, repoId: string, change: ChangeRecord): void {
  if (change.rebased_at_seq === null) return;
  const seq = ctx.batch.rebasedBy(repoId, change.id);
  if (seq !== undefined && seq < ctx.seq) {
    throw new ServiceError('ABORTED', `change ${change.id} was rebased by an earlier write while this one was waiting; read it again and retry`, {
      change_id: change.id,
      current_commit_oid: change.commit_oid,
    });
  }
}

// ---- authors ------------------------------------------------------------------------------

export interface PersonInput {
  name: string;
  email?: string | null;
  /** Sets the author time; an RFC 3339 date-time (the body's schema checks it, src/protocol/schemas/people.ts). */
  date?: string | null;
}

export interface AuthorsInput {
  author?: PersonInput | null;
  committer?: PersonInput | null;
  authors?: Array<{ name: string; email?: string | null }> | null;
}

const person = (p: { name: string; email?: string | null }): Person => ({ name: p.name, email: p.email ? p.email : null });

/** The authors a body names (`authors`, else `author`), or null when it names none. */
function bodyAuthors(input: AuthorsInput): Person[] | null {
  if (input.authors && input.authors.length > 0) return input.authors.map(person);
  if (input.author) return [person(input.author)];
  return null;
}

// ---- bookmarks ----------------------------------------------------------------------------

/**
 * `move`: the bookmark must exist (404 BRANCH_NOT_FOUND); `create`: it must not (409
 * BRANCH_EXISTS); `upsert`: created when missing, moved otherwise.
 */
export type BookmarkWriteMode = 'move' | 'create' | 'upsert';

export interface BookmarkMove {
  name: string;
  change_id: string;
  allow_backwards?: boolean | null;
  /** Guard: the bookmark's current target; a mismatch → 409 ABORTED. */
  expected_change_id?: string | null;
  mode?: BookmarkWriteMode;
}

export interface BookmarkMoveResult {
  record: BookmarkRecord;
  view: BookmarkView;
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
  /** Omitted: the writer. */
  committer?: Person;
}

export interface EvolveResult {
  /** null when nothing changed (no new commit was written). */
  previousCommitOid: string | null;
  record: ChangeRecord;
  rebased: RebasedChange[];
}

export class RepoWrite {
  readonly repo: RepoRecord;
  readonly org: OrgRecord;
  readonly store: LmdbObjectStore;
  /** What the command's objects cost; they are referenced by the change they are written for. */
  readonly accounting: ObjectAccounting;
  private readonly pendingEvolution: Array<{ changeId: string; commitOid: string; predecessorOid: string | null }> = [];
  private readonly commits = new Map<string, ChangeCommitView>();
  /** Change records read or written by this command (it is the only writer meanwhile). */
  private readonly records = new Map<string, ChangeRecord>();
  /** Changes rebased by this command, announced to the batch once it has succeeded. */
  private readonly rebasedIds: string[] = [];
  private readonly nowIso: string;

  constructor(
    readonly ctx: CommandContext,
    repoId: string,
  ) {
    const repo = getRepo(ctx.storage.meta, repoId);
    if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    const org = getOrg(ctx.storage.meta, repo.org_id);
    if (!org) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    this.repo = repo;
    this.org = org;
    this.accounting = new ObjectAccounting(ctx.storage.meta, repo.id, REFERENCE, ctx.now.getTime());
    this.store = objectStore(ctx.storage, repo.id, { observer: this.accounting });
    this.nowIso = ctx.now.toISOString();
  }

  private get meta(): CommandContext['storage']['meta'] {
    return this.ctx.storage.meta;
  }

  /** The writer of this command: committer of everything it writes (API §5.3). */
  get writer(): Person {
    const first = this.ctx.principal.authors[0];
    if (first) return { name: first.name, email: first.hasEmail ? first.email : null };
    return { name: this.ctx.principal.keyName, email: null };
  }

  /** Authors of a new change: the token's `author` claim, else the body's, else the key's name. */
  newChangeAuthors(input: AuthorsInput): { authors: Person[]; authoredAt: Date } {
    const claim = this.ctx.principal.authors;
    const authors = claim.length > 0 ? claim.map((a) => ({ name: a.name, email: a.hasEmail ? a.email : null })) : bodyAuthors(input) ?? [{ name: this.ctx.principal.keyName, email: null }];
    return { authors, authoredAt: input.author?.date ? new Date(input.author.date) : this.ctx.now };
  }

  /** Authors replacing a change's on evolve (a body `authors`/`author`), or undefined to keep them. */
  replacementAuthors(input: AuthorsInput): { authors: Person[]; authoredAt?: Date } | undefined {
    const authors = bodyAuthors(input);
    if (!authors) return undefined;
    return { authors, authoredAt: input.author?.date ? new Date(input.author.date) : undefined };
  }

  /** The committer a body asks for, else the writer. */
  committerFor(input: AuthorsInput): Person {
    return input.committer ? person(input.committer) : this.writer;
  }

  /** A change of this repository, or 404 CHANGE_NOT_FOUND (the virtual root is not a change). */
  change(changeId: string): ChangeRecord {
    const record = this.records.get(changeId) ?? this.load(changeId);
    if (!record) throw notFound('CHANGE_NOT_FOUND', `change ${changeId} not found`, { change_id: changeId });
    return record;
  }

  private load(changeId: string): ChangeRecord | undefined {
    if (!isChangeId(changeId)) throw invalid(`"${changeId}" is not a change id`);
    const record = changeId === ROOT_CHANGE_ID ? undefined : getChange(this.meta, this.repo.id, changeId);
    if (record) this.records.set(changeId, record);
    return record;
  }

  /** The change, or null for the virtual root; 404 for anything else unknown. */
  changeOrRoot(changeId: string): ChangeRecord | null {
    if (changeId === ROOT_CHANGE_ID) return null;
    return this.change(changeId);
  }

  commit(oid: string): ChangeCommitView {
    let view = this.commits.get(oid);
    if (!view) this.commits.set(oid, (view = changeCommitView(oid, readCommit(this.store, oid))));
    return view;
  }

  /** The tree set of a change (the empty tree for the virtual root). */
  treesOf(record: ChangeRecord | null): TreeSet {
    if (!record) return [this.emptyTree()];
    return this.commit(record.commit_oid).trees;
  }

  private emptyTree(): string {
    return writeEmptyTree(this.store);
  }

  view(record: ChangeRecord): ChangeView {
    return changeView(record, this.commit(record.commit_oid));
  }

  private parentCommits(parents: readonly string[]): string[] {
    return parents.filter((p) => p !== ROOT_CHANGE_ID).map((p) => this.change(p).commit_oid);
  }

  /** Writes a new change (commit, record, indexes) and emits `change.created`. */
  createChange(input: NewChangeInput): ChangeRecord {
    const changeId = input.changeId ?? this.newChangeId();
    const parents = input.parents.length > 0 ? [...input.parents] : [ROOT_CHANGE_ID];
    let generation = 1;
    for (const p of parents) if (p !== ROOT_CHANGE_ID) generation = Math.max(generation, this.change(p).generation + 1);
    const commitOid = writeChangeCommit(this.store, {
      trees: input.trees,
      parents: this.parentCommits(parents),
      changeId,
      authors: input.authors,
      authoredAt: input.authoredAt,
      committer: input.committer ?? this.writer,
      committedAt: this.ctx.now,
      description: input.description,
      attribution: input.attribution ?? null,
    });
    const record = putNewChange(
      this.meta,
      this.repo.id,
      { id: changeId, commit_oid: commitOid, parents, created_at: this.nowIso, updated_at: this.nowIso, rebased_at_seq: null, is_conflicted: input.trees.length > 1 },
      generation,
    );
    this.records.set(changeId, record);
    this.pendingEvolution.push({ changeId, commitOid, predecessorOid: null });
    this.ctx.mutation.emit('change.created', this.org, this.repo, { change: this.view(record) });
    return record;
  }

  /**
   * Evolves a change: a new commit with the same change id and parents, then every descendant
   * rebased onto it (parents first; a rebase that conflicts leaves that descendant conflicted).
   * Emits `change.evolved` for the change and for each rebased descendant. Nothing is written
   * when the new commit would say exactly what the current one says.
   */
  evolveChange(record: ChangeRecord, input: EvolveInput): EvolveResult {
    const old = this.commit(record.commit_oid);
    const description = input.description ?? old.message;
    const authors = input.authors ?? old.authors;
    const authoredAt = input.authoredAt ?? (input.authors ? this.ctx.now : new Date(old.authoredAt));
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

    const commitOid = writeChangeCommit(this.store, {
      trees: input.trees,
      parents: this.parentCommits(record.parents),
      changeId: record.id,
      authors,
      authoredAt,
      committer: input.committer ?? this.writer,
      committedAt: this.ctx.now,
      description,
      attribution,
    });
    const previous = record.commit_oid;
    const updated: ChangeRecord = { ...record, commit_oid: commitOid, is_conflicted: input.trees.length > 1, updated_at: this.nowIso };
    putChange(this.meta, this.repo.id, updated);
    this.records.set(updated.id, updated);
    this.pendingEvolution.push({ changeId: record.id, commitOid, predecessorOid: previous });
    this.ctx.mutation.emit('change.evolved', this.org, this.repo, { change: this.view(updated), previous_current_commit_oid: previous });
    const rebased = this.rebaseDescendantsOf(new Map([[record.id, { old: previous, new: commitOid }]]));
    return { previousCommitOid: previous, record: updated, rebased };
  }

  /**
   * A new change for a commit that arrived whole (a git push, API §14): the commit is kept as it
   * is. `parents` are the change ids of its parents. Emits `change.created`.
   */
  adoptNewChange(changeId: string, commitOid: string, parents: string[], isConflicted: boolean): ChangeRecord {
    let generation = 1;
    for (const p of parents) if (p !== ROOT_CHANGE_ID) generation = Math.max(generation, this.change(p).generation + 1);
    const record = putNewChange(
      this.meta,
      this.repo.id,
      { id: changeId, commit_oid: commitOid, parents, created_at: this.nowIso, updated_at: this.nowIso, rebased_at_seq: null, is_conflicted: isConflicted },
      generation,
    );
    this.records.set(changeId, record);
    this.pendingEvolution.push({ changeId, commitOid, predecessorOid: null });
    this.ctx.mutation.emit('change.created', this.org, this.repo, { change: this.view(record) });
    return record;
  }

  /**
   * A change's next commit that arrived whole (a git push, API §14): kept as it is, parents
   * included, so the change moves when the commit has other parents (`parents`: their change
   * ids). Emits `change.evolved`. Its descendants are not rebased here: the caller does that
   * once every pushed commit is in (`rebaseDescendantsOf`), so that what the push itself rewrote
   * is not rebased first.
   */
  adoptCommit(record: ChangeRecord, commitOid: string, parents: string[], isConflicted: boolean): ChangeRecord {
    const previous = record.commit_oid;
    const next: ChangeRecord = { ...record, commit_oid: commitOid, parents, is_conflicted: isConflicted, updated_at: this.nowIso };
    let updated = next;
    const moved = parents.length !== record.parents.length || parents.some((p, i) => p !== record.parents[i]);
    if (moved) {
      for (const rewritten of putReparentedChange(this.meta, this.repo.id, next, record.parents)) this.records.set(rewritten.id, rewritten);
      updated = this.records.get(record.id)!;
    } else {
      putChange(this.meta, this.repo.id, next);
      this.records.set(next.id, next);
    }
    this.pendingEvolution.push({ changeId: record.id, commitOid, predecessorOid: previous });
    this.ctx.mutation.emit('change.evolved', this.org, this.repo, { change: this.view(updated), previous_current_commit_oid: previous });
    return updated;
  }

  /**
   * Rebases every descendant of changes whose commits were rewritten (`rewritten`: change id →
   * old and new commit), recording and announcing each. Callers that rewrite commits themselves
   * (imports, merges) use it directly; `evolveChange` calls it.
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
      for (const child of childrenOf(this.meta, this.repo.id, stack.pop()!)) {
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
    const results = rebaseDescendants(this.store, graph, commitMap, { committer: this.writer, committedAt: this.ctx.now });
    for (const result of results) {
      const record = this.change(result.changeId);
      const updated: ChangeRecord = {
        ...record,
        commit_oid: result.newCommitOid,
        is_conflicted: result.isConflicted,
        updated_at: this.nowIso,
        rebased_at_seq: this.ctx.seq,
      };
      putChange(this.meta, this.repo.id, updated);
      this.records.set(updated.id, updated);
      this.rebasedIds.push(updated.id);
      this.pendingEvolution.push({ changeId: updated.id, commitOid: result.newCommitOid, predecessorOid: result.oldCommitOid });
      this.ctx.mutation.emit('change.evolved', this.org, this.repo, { change: this.view(updated), previous_current_commit_oid: result.oldCommitOid });
    }
    return results;
  }

  /** The commit oid a bookmark at `changeId` shows in events (the null oid at the virtual root). */
  private commitOfTarget(changeId: string): string {
    return changeId === ROOT_CHANGE_ID ? NULL_OID : this.change(changeId).commit_oid;
  }

  /**
   * Creates or moves bookmarks atomically (API §6.2, §6.3): every move is checked before any is
   * applied. A move must advance history (the new target descends from or equals the old one)
   * unless `allow_backwards`; all refused names are reported together in
   * `details.bookmark_names` (409 BOOKMARK_MOVE_HISTORY_REWRITE). `expected_change_id` guards
   * against a concurrent move (409 ABORTED). Emits `bookmark.created` / `bookmark.moved` unless
   * `emitEvents` is false (a merge announces `bookmark.merged` itself).
   */
  moveBookmarks(moves: readonly BookmarkMove[], options: { emitEvents?: boolean } = {}): BookmarkMoveResult[] {
    const names = new Set<string>();
    const refused: string[] = [];
    const plan: Array<{ move: BookmarkMove; existing: BookmarkRecord | undefined }> = [];
    for (const move of moves) {
      checkBookmarkName(move.name);
      if (names.has(move.name)) throw invalid(`bookmark "${move.name}" is named twice`);
      names.add(move.name);
      this.changeOrRoot(move.change_id);
      const existing = getBookmark(this.meta, this.repo.id, move.name);
      const mode = move.mode ?? 'move';
      if (!existing && mode === 'move') throw notFound('BRANCH_NOT_FOUND', `bookmark "${move.name}" not found`, { bookmark: move.name });
      if (existing && mode === 'create') throw new ServiceError('BRANCH_EXISTS', `bookmark "${move.name}" already exists`, { bookmark: move.name });
      if (move.expected_change_id != null && (existing?.change_id ?? null) !== move.expected_change_id) {
        throw new ServiceError('ABORTED', `bookmark "${move.name}" no longer points at ${move.expected_change_id}`, {
          bookmark: move.name,
          change_id: existing?.change_id ?? null,
        });
      }
      if (existing && !move.allow_backwards && !isChangeAncestor(this.meta, this.repo.id, existing.change_id, move.change_id)) refused.push(move.name);
      plan.push({ move, existing });
    }
    if (refused.length > 0) {
      throw new ServiceError('BOOKMARK_MOVE_HISTORY_REWRITE', `moving ${refused.map((n) => `"${n}"`).join(', ')} would not advance history (set allow_backwards to force)`, {
        bookmark_names: refused,
      });
    }
    const emit = options.emitEvents ?? true;
    return plan.map(({ move, existing }) => {
      const record: BookmarkRecord = existing
        ? { ...existing, change_id: move.change_id, updated_at: existing.change_id === move.change_id ? existing.updated_at : this.nowIso }
        : { name: move.name, change_id: move.change_id, created_at: this.nowIso, updated_at: this.nowIso };
      const changed = !existing || existing.change_id !== move.change_id;
      if (changed) this.meta.putSync(K.bookmark(this.repo.id, record.name), record);
      if (emit && changed) {
        const bookmark = bookmarkEventView(this.repo, record, this.commitOfTarget(record.change_id));
        if (existing) {
          this.ctx.mutation.emit('bookmark.moved', this.org, this.repo, {
            bookmark,
            from: { change_id: existing.change_id, commit_oid: this.commitOfTarget(existing.change_id) },
          });
        } else this.ctx.mutation.emit('bookmark.created', this.org, this.repo, { bookmark });
      }
      return { record, view: bookmarkView(this.repo, record), from_change_id: existing?.change_id ?? null, created: !existing };
    });
  }

  /**
   * API §4.2: whether a change created on `baseId` is the repository's first write — on the
   * virtual root of a repository without changes whose default bookmark is still at the root.
   * Ask before creating it; then `advanceDefaultBookmark` moves the bookmark to it.
   */
  isFirstWrite(baseId: string): boolean {
    if (baseId !== ROOT_CHANGE_ID) return false;
    if (getBookmark(this.meta, this.repo.id, this.repo.default_bookmark)?.change_id !== ROOT_CHANGE_ID) return false;
    return isRepositoryEmpty(this.meta, this.repo.id);
  }

  /** Moves the default bookmark to the first change (same operation), unless the body moves it. */
  advanceDefaultBookmark(created: ChangeRecord, explicit: ReadonlySet<string>): BookmarkMoveResult | null {
    if (explicit.has(this.repo.default_bookmark)) return null;
    return this.moveBookmarks([{ name: this.repo.default_bookmark, change_id: created.id }])[0]!;
  }

  /** A fresh change id this repository has not used (16 random bytes: a clash is theoretical). */
  newChangeId(): string {
    for (;;) {
      const id = newChangeId();
      if (!this.records.has(id) && !getChange(this.meta, this.repo.id, id)) return id;
    }
  }

  /**
   * Ends the command's writes: charges the objects it stored to the org's quota (413
   * QUOTA_EXCEEDED rolls the whole command back), appends the operation (its id is the
   * `operation_id`), records the evolution entries under it and stores the repository record
   * (its `last_op_id` moved).
   */
  finish(kind: string, summary: Record<string, unknown>): string {
    this.accounting.settle(this.org.id, this.ctx.settings.orgQuotaBytes);
    const opId = this.ctx.mutation.operation(this.repo, kind, summary);
    for (const entry of this.pendingEvolution) {
      putEvolution(this.meta, this.repo.id, entry.changeId, ulid(this.ctx.now.getTime()), {
        commit_oid: entry.commitOid,
        predecessor_oid: entry.predecessorOid,
        operation_id: opId,
        created_at: this.nowIso,
      });
    }
    this.pendingEvolution.length = 0;
    this.meta.putSync(K.repo(this.repo.id), this.repo);
    // Only now: a command that fails rolls back its rebases, which must then refuse nothing.
    for (const id of this.rebasedIds.splice(0)) this.ctx.batch.noteRebased(this.repo.id, id, this.ctx.seq);
    return opId;
  }
}

function sameAuthors(a: readonly Person[], b: readonly Person[]): boolean {
  return a.length === b.length && a.every((p, i) => p.name === b[i]!.name && (p.email ?? '') === (b[i]!.email ?? ''));
}
