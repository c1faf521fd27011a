import { notFound } from '../../errors.js';
import { checkBookmarkName } from '../../protocol/names.js';
import { compileRefGlob } from '../../protocol/ref-glob.js';
import { createBookmarkBody, mergeBody, moveBookmarkBody, moveBookmarksBody, type MoveInput } from '../../protocol/schemas/bookmarks.js';
import { bookmarkView, type BookmarkView } from '../../protocol/views/bookmark.js';
import { bookmarkNamesFrom, getBookmark } from '../../storage/repo-store.js';
import type { CreateBookmarkInput, DeleteBookmarkInput, MoveBookmarksInput, MoveRequest } from '../../actors/commands/bookmarks.js';
import type { MergeBookmarksInput } from '../../actors/commands/merge.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { decodeCursor, encodeCursor, hasString } from '../cursor.js';
import { withBody, type Reply, type RequestContext, type RouteDef } from '../route.js';

/**
 * Bookmark routes (API §6). Reads are served here from an LMDB snapshot; every write goes to the
 * repository's actor, which applies it as one step of the repository's single writer.
 */

const BOOKMARKS = '/{org}/{repo}/bookmarks';
const BOOKMARK = '/{org}/{repo}/bookmarks/{bookmark}';

/**
 * A glob's tests of names, counted as name length × the glob's states (the matcher's steps at most,
 * about 7 ns each here): between turns of the event loop about 7 ms, in one page about 100 ms.
 */
const GLOB_TURN_WORK = 1_000_000;
const GLOB_PAGE_WORK = 15_000_000;

/** A page of the repository's bookmarks; yields where the walk wants other requests to run first. */
function* bookmarkPage(ctx: RequestContext): Generator<'turn', Reply> {
  const repo = ctx.repo!;
  const meta = ctx.services.storage.meta;
  const glob = ctx.query.glob === undefined || ctx.query.glob === '' ? null : compileRefGlob(String(ctx.query.glob));
  const cursor = decodeCursor(ctx.query.cursor, hasString('after'));
  const limit = ctx.query.limit as number;
  // Names sort as keys, so the glob's literal prefix bounds the scan and the cursor is a name.
  let from: string | null = glob?.prefix ? glob.prefix : null;
  // Keys compare as UTF-8 bytes, so the later of the two starting points is chosen the same way.
  if (cursor && (glob === null || Buffer.compare(Buffer.from(cursor.after), Buffer.from(glob.prefix)) >= 0)) from = cursor.after;
  const bookmarks: BookmarkView[] = [];
  let hasMore = false;
  // The last name this page is done with: where the next one starts.
  let passed: string | null = null;
  // A glob that matches few of many names tests them all, each in O(name × glob): other
  // requests run between turns, and a page that has tested its share ends where it got to.
  let work = 0;
  let turn = GLOB_TURN_WORK;
  for (const name of bookmarkNamesFrom(meta, repo.id, from)) {
    if (cursor && name === cursor.after) continue;
    if (glob) {
      if (!name.startsWith(glob.prefix)) break;
      work += name.length * glob.states;
      if (work > GLOB_PAGE_WORK && passed !== null) {
        hasMore = true;
        break;
      }
      if (work > turn) {
        turn = work + GLOB_TURN_WORK;
        yield 'turn';
      }
      if (!glob.test(name)) {
        passed = name;
        continue;
      }
    }
    if (bookmarks.length === limit) {
      hasMore = true;
      break;
    }
    const record = getBookmark(meta, repo.id, name);
    if (record) bookmarks.push(bookmarkView(repo, record));
    passed = name;
  }
  return {
    status: 200,
    schema: 'bookmarkPage',
    value: { bookmarks, next_cursor: hasMore && passed !== null ? encodeCursor({ after: passed }) : null, has_more: hasMore },
  };
}

/**
 * Runs `walk` on this turn of the event loop until it asks for another: a walk that never asks
 * answers at once. One whose client has gone is closed at once, and its LMDB cursor with it,
 * rather than left to the collector.
 */
function drive(ctx: RequestContext, walk: Generator<'turn', Reply>): Reply | Promise<Reply> {
  const step = walk.next();
  if (step.done) return step.value;
  return ctx.connection.connectionSettled().then(
    () => drive(ctx, walk),
    (err: unknown) => {
      walk.return(undefined as never);
      throw err;
    },
  );
}

export const bookmarkRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: BOOKMARKS,
    permission: 'git:read',
    query: { keys: { cursor: { type: 'string' }, limit: { type: 'int', min: 1, max: 200, default: 50 }, glob: { type: 'string' } } },
    handler: (ctx) => drive(ctx, bookmarkPage(ctx)),
  },
  withBody(createBookmarkBody, {
    method: 'POST',
    path: BOOKMARKS,
    permission: 'git:write',
    actor: 'repo',
    handler(ctx) {
      checkBookmarkName(ctx.body.name);
      const input: CreateBookmarkInput = { repo_id: ctx.repo!.id, name: ctx.body.name, change_id: ctx.body.change_id };
      return callActor(ctx, repoActor(ctx.repo!.id), 'bookmark.create', input);
    },
  }),
  withBody(moveBookmarksBody, {
    method: 'PATCH',
    path: BOOKMARKS,
    permission: 'git:write',
    actor: 'repo',
    handler(ctx) {
      const input: MoveBookmarksInput = { repo_id: ctx.repo!.id, single: false, moves: ctx.body.moves.map(moveRequest) };
      return callActor(ctx, repoActor(ctx.repo!.id), 'bookmark.move', input);
    },
  }),
  withBody(mergeBody, {
    method: 'POST',
    path: '/{org}/{repo}/bookmarks/merge',
    permission: 'git:write',
    actor: 'repo',
    handler(ctx) {
      const input: MergeBookmarksInput = { repo_id: ctx.repo!.id, ...ctx.body };
      return callActor(ctx, repoActor(ctx.repo!.id), 'bookmark.merge', input);
    },
  }),
  {
    method: 'GET',
    path: BOOKMARK,
    permission: 'git:read',
    handler(ctx) {
      const repo = ctx.repo!;
      const name = ctx.params.bookmark!;
      const record = getBookmark(ctx.services.records, repo.id, name);
      if (!record) throw notFound('BRANCH_NOT_FOUND', `bookmark "${name}" not found`);
      return { status: 200, schema: 'bookmark', value: bookmarkView(repo, record) };
    },
  },
  withBody(moveBookmarkBody, {
    method: 'PATCH',
    path: BOOKMARK,
    permission: 'git:write',
    actor: 'repo',
    handler(ctx) {
      const input: MoveBookmarksInput = { repo_id: ctx.repo!.id, single: true, moves: [moveRequest({ ...ctx.body, name: ctx.params.bookmark! })] };
      return callActor(ctx, repoActor(ctx.repo!.id), 'bookmark.move', input);
    },
  }),
  {
    method: 'DELETE',
    path: BOOKMARK,
    permission: 'git:write',
    handler(ctx) {
      const input: DeleteBookmarkInput = { repo_id: ctx.repo!.id, name: ctx.params.bookmark! };
      return callActor(ctx, repoActor(ctx.repo!.id), 'bookmark.delete', input);
    },
  },
];

/** Drops the `null`s a client may send for omitted optional fields (API §1). */
function moveRequest(m: MoveInput & { name: string }): MoveRequest {
  const out: MoveRequest = { name: m.name, change_id: m.change_id };
  if (m.allow_backwards) out.allow_backwards = true;
  if (m.expected_change_id != null) out.expected_change_id = m.expected_change_id;
  return out;
}
