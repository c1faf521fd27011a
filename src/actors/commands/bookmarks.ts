import { notFound } from '../../errors.js';
import type { OrgRecord, RepoRecord } from '../../storage/records.js';
import { getRepo } from '../../storage/repo-store.js';
import { defineCommand, type CommandContext } from '../command.js';
import { RepoWrite, type BookmarkMove } from './repo-writes.js';

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
  const record = w.deleteBookmark(input.name);
  w.finish('bookmark.delete', { name: record.name, change_id: record.change_id });
  return { status: 200, body: { success: true }, schema: 'success' };
});
