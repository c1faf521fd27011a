import { invalid, ServiceError } from '../../errors.js';
import type { Person } from '../../vcs/commit.js';
import { NULL_OID, ROOT_CHANGE_ID } from '../../vcs/ids.js';
import { RepoTransaction, type BookmarkMove, type BookmarkWrite } from '../../vcs/transaction.js';
import { checkBookmarkName } from '../../protocol/names.js';
import { changeView, type ChangeView } from '../../protocol/views/change.js';
import { bookmarkEventView, bookmarkView, type BookmarkView } from '../../protocol/views/bookmark.js';
import { objectStore } from '../../storage/change-store.js';
import type { LmdbObjectStore } from '../../storage/git-object-store.js';
import { LmdbRepoStore } from '../../storage/lmdb-repo-store.js';
import { ObjectAccounting, REFERENCE } from '../../storage/object-accounting.js';
import type { BookmarkRecord, ChangeRecord, OrgRecord, RepoRecord } from '../../storage/records.js';
import { getRepo, putRepo } from '../../storage/repo-store.js';
import type { PrincipalMsg } from '../../protocol/messages.js';
import type { CommandContext } from '../command.js';

export type { BookmarkMove } from '../../vcs/transaction.js';

/**
 * A repository transaction (src/vcs/transaction.ts) as a command runs it: over the repository's
 * LMDB stores, inside the command's child transaction, announcing what it writes as events and
 * recording one operation. Shared by every command that writes changes or bookmarks (changes,
 * apply-ops, bookmarks, merges, pushes):
 *
 *   const w = new RepoWrite(ctx, repoId);
 *   const change = w.createChange({...});        // or w.evolveChange(record, {...})
 *   w.moveBookmarks([{ name, change_id }]);      // the §6.2 history rule, all or nothing
 *   const opId = w.finish('kind', summary);      // quota, op-log entry, evolution records, repo record
 *
 * Besides the model's invariants: each rewritten change gets a `change.evolved` event, each new
 * one `change.created`; the objects it stores are charged to the org's quota, all or nothing
 * (`finish`).
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

export interface BookmarkMoveResult extends BookmarkWrite {
  view: BookmarkView;
}

/** The writer of a command: committer of everything it writes (API §5.3). */
function writerOf(principal: PrincipalMsg): Person {
  const first = principal.authors[0];
  if (first) return { name: first.name, email: first.hasEmail ? first.email : null };
  return { name: principal.keyName, email: null };
}

export class RepoWrite extends RepoTransaction {
  readonly repo: RepoRecord;
  readonly org: OrgRecord;
  readonly store: LmdbObjectStore;
  /** What the command's objects cost; they are referenced by the change they are written for. */
  readonly accounting: ObjectAccounting;

  /**
   * `announceChanges: false` leaves out `change.created`/`change.evolved`: a pull announces what it
   * imported in its one `push` event instead.
   */
  constructor(
    readonly ctx: CommandContext,
    repoId: string,
    private readonly announce: { announceChanges: boolean } = { announceChanges: true },
  ) {
    const repo = getRepo(ctx.storage.meta, repoId);
    if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    const org = ctx.directory.org(repo.org_id);
    if (!org) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    const accounting = new ObjectAccounting(ctx.storage.meta, repo.id, REFERENCE, ctx.now.getTime());
    const store = objectStore(ctx.storage, repo.id, { observer: accounting });
    super(new LmdbRepoStore(ctx.storage.meta, repo.id), store, { now: ctx.now, committer: writerOf(ctx.principal), seq: ctx.seq });
    this.repo = repo;
    this.org = org;
    this.accounting = accounting;
    this.store = store;
  }

  /** The writer of this command: committer of everything it writes (API §5.3). */
  get writer(): Person {
    return this.options.committer;
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

  view(record: ChangeRecord): ChangeView {
    return changeView(record, this.commit(record.commit_oid));
  }

  protected override onChangeCreated(record: ChangeRecord): void {
    if (this.announce.announceChanges) this.ctx.mutation.emit('change.created', this.org, this.repo, { change: this.view(record) });
  }

  protected override onChangeEvolved(record: ChangeRecord, previousCommitOid: string): void {
    if (this.announce.announceChanges) this.ctx.mutation.emit('change.evolved', this.org, this.repo, { change: this.view(record), previous_current_commit_oid: previousCommitOid });
  }

  /** The commit oid a bookmark at `changeId` shows in events (the null oid at the virtual root). */
  private commitOfTarget(changeId: string): string {
    return changeId === ROOT_CHANGE_ID ? NULL_OID : this.change(changeId).commit_oid;
  }

  /**
   * The model's bookmark moves (all or nothing, the history rule) for names the API accepts.
   * Emits `bookmark.created` / `bookmark.moved` unless `emitEvents` is false (a merge announces
   * `bookmark.merged` itself).
   */
  override moveBookmarks(moves: readonly BookmarkMove[], options: { emitEvents?: boolean } = {}): BookmarkMoveResult[] {
    for (const move of moves) checkBookmarkName(move.name);
    const emit = options.emitEvents ?? true;
    return super.moveBookmarks(moves).map((written) => {
      const { record, from_change_id: from } = written;
      if (emit && from !== record.change_id) {
        const bookmark = bookmarkEventView(this.repo, record, this.commitOfTarget(record.change_id));
        if (from !== null) {
          this.ctx.mutation.emit('bookmark.moved', this.org, this.repo, { bookmark, from: { change_id: from, commit_oid: this.commitOfTarget(from) } });
        } else this.ctx.mutation.emit('bookmark.created', this.org, this.repo, { bookmark });
      }
      return { ...written, view: bookmarkView(this.repo, record) };
    });
  }

  /** Removes a bookmark with its `bookmark.deleted` event; the default bookmark is refused. */
  deleteBookmark(name: string): BookmarkRecord {
    if (name === this.repo.default_bookmark) {
      this.existingBookmark(name); // a missing bookmark is still 404 first
      throw invalid(`"${name}" is the default bookmark; change the default bookmark first`);
    }
    const record = this.removeBookmark(name);
    this.ctx.mutation.emit('bookmark.deleted', this.org, this.repo, {
      bookmark: bookmarkEventView(this.repo, record, this.commitOfTarget(record.change_id)),
    });
    return record;
  }

  /** Moves the default bookmark to the first change (same operation), unless the body moves it. */
  advanceDefaultBookmark(created: ChangeRecord, explicit: ReadonlySet<string>): BookmarkMoveResult | null {
    if (explicit.has(this.repo.default_bookmark)) return null;
    return this.moveBookmarks([{ name: this.repo.default_bookmark, change_id: created.id }])[0]!;
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
    this.recordEvolution(opId);
    putRepo(this.ctx.storage.meta, this.repo);
    // Only now: a command that fails rolls back its rebases, which must then refuse nothing.
    for (const id of this.rebasedIds.splice(0)) this.ctx.batch.noteRebased(this.repo.id, id, this.ctx.seq);
    return opId;
  }
}
