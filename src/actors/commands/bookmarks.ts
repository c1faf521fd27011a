import { invalid, notFound } from '../../errors.js';
import { bookmarkEventView } from '../../protocol/views/bookmark.js';
import { commitOidOf } from '../../storage/change-store.js';
import type { BookmarkRecord, OrgRecord, RepoRecord } from '../../storage/records.js';
import { getBookmark, getRepo, removeBookmark as removeBookmarkRecord } from '../../storage/repo-store.js';
import { defineCommand, type CommandContext } from '../command.js';
import { RepoWrite, type BookmarkMove, type BookmarkMoveResult } from './repo-writes.js';

/**
 * Bookmark writes (API §6.2): create, move (one or several, atomically), delete. They run in the
 * repository's actor, so a guard (`expected_change_id`) and the history rule are checked against
 * the state the write actually applies to: racing moves serialize, never interleave.
 */

export type MoveRequest = Omit<BookmarkMove, 'mode'>;

export interface CreateBookmarkInput {
  repo_id: string;
  name: string;
  change_id: string;
}

export interface MoveBookmarksInput {
  repo_id: string;
  /** `PATCH …/bookmarks/{name}` (answers one Bookmark + `from_change_id`) or the multi-move. */
  single: boolean;
  moves: MoveRequest[];
}

export interface DeleteBookmarkInput {
  repo_id: string;
  name: string;
}

export interface RepoScope {
  org: OrgRecord;
  repo: RepoRecord;
}

/** The repository a command writes to; it may have been deleted while the message was queued. */
export function repoScope(ctx: CommandContext, repoId: string): RepoScope {
  const repo = getRepo(ctx.storage.meta, repoId);
  if (!repo) throw notFound('REPO_NOT_FOUND', 'repository not found');
  const org = ctx.directory.org(repo.org_id);
  if (!org) throw notFound('REPO_NOT_FOUND', 'repository not found');
  return { org, repo };
}

/** The commit a bookmark event shows for a change (the null oid at the virtual root). */
function commitOfTarget(ctx: CommandContext, repoId: string, changeId: string): string {
  const oid = commitOidOf(ctx.storage.meta, repoId, changeId);
  if (oid === undefined) throw notFound('CHANGE_NOT_FOUND', `change ${changeId} not found`, { change_id: changeId });
  return oid;
}

export function existingBookmark(ctx: CommandContext, repoId: string, name: string): BookmarkRecord {
  const record = getBookmark(ctx.storage.meta, repoId, name);
  if (!record) throw notFound('BRANCH_NOT_FOUND', `bookmark "${name}" not found`);
  return record;
}

/**
 * Moves bookmarks atomically with the history rule (API §6.2) for callers that hold a scope
 * rather than a `RepoWrite` (sync imports): the shared rule lives in `RepoWrite.moveBookmarks`.
 */
export function moveBookmarks(ctx: CommandContext, scope: RepoScope, moves: readonly BookmarkMove[]): BookmarkMoveResult[] {
  return new RepoWrite(ctx, scope.repo.id).moveBookmarks(moves);
}

/** Removes a bookmark with its `bookmark.deleted` event; the default bookmark is refused. */
export function deleteBookmark(ctx: CommandContext, scope: RepoScope, name: string): BookmarkRecord {
  const { org, repo } = scope;
  const record = existingBookmark(ctx, repo.id, name);
  if (name === repo.default_bookmark) {
    throw invalid(`"${name}" is the default bookmark; change the default bookmark first`);
  }
  removeBookmarkRecord(ctx.storage.meta, repo.id, name);
  ctx.mutation.emit('bookmark.deleted', org, repo, {
    bookmark: bookmarkEventView(repo, record, commitOfTarget(ctx, repo.id, record.change_id)),
  });
  return record;
}

export const createBookmark = defineCommand<CreateBookmarkInput>('bookmark.create', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id);
  const [created] = w.moveBookmarks([{ name: input.name, change_id: input.change_id, mode: 'create' }]);
  w.finish('bookmark.create', { name: input.name, change_id: input.change_id });
  return { status: 201, body: created!.view, schema: 'bookmark' };
});

export const moveBookmark = defineCommand<MoveBookmarksInput>('bookmark.move', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id);
  const applied = w.moveBookmarks(input.moves.map((m) => ({ ...m, mode: 'move' as const })));
  const changed = applied.filter((a) => a.record.change_id !== a.from_change_id);
  // A move onto the bookmark's own target changes nothing, so it leaves no operation behind.
  if (changed.length > 0) {
    w.finish('bookmark.move', { moves: changed.map((a) => ({ name: a.record.name, from: a.from_change_id, to: a.record.change_id })) });
  }
  if (input.single) {
    const [only] = applied;
    return { status: 200, body: { ...only!.view, from_change_id: only!.from_change_id }, schema: 'bookmarkMoved' };
  }
  return { status: 200, body: { bookmarks: applied.map((a) => a.view) }, schema: 'bookmarkList' };
});

export const removeBookmark = defineCommand<DeleteBookmarkInput>('bookmark.delete', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id);
  const record = deleteBookmark(ctx, w, input.name);
  w.finish('bookmark.delete', { name: record.name, change_id: record.change_id });
  return { status: 200, body: { success: true }, schema: 'success' };
});
