import { invalid, notFound } from '../../errors.js';
import type { Static } from '@sinclair/typebox';
import { createSyncBody, pushBody } from '../../protocol/schemas/syncs.js';
import { syncRunView, syncView } from '../../protocol/views/sync.js';
import { getSync, orgSyncsNewestFirst, repoSyncsNewestFirst } from '../../storage/sync-store.js';
import type { RepoRecord, SyncRecord } from '../../storage/records.js';
import { getRepo, getRepoByName } from '../../storage/repo-store.js';
import type { EnqueueSyncInput } from '../../actors/commands/syncs.js';
import { wakeSyncActor } from '../../actors/system/sync/index.js';
import { normalizeRefGlobs } from '../../actors/system/sync/ref-filter.js';
import { canAccessRepo } from '../auth/principal.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { cursorPage, decodeCursor, hasString } from '../cursor.js';
import { withBody, type Reply, type RequestContext, type RouteDef } from '../route.js';

/**
 * Upstream sync routes (API §9). Enqueueing goes through the repository's actor (which writes
 * the record and its `sync.queued` event) and then wakes the sync actor; reads are served here
 * from an LMDB snapshot, newest first, with cursors that are sync ids (ULIDs sort by creation).
 */

async function enqueue(ctx: RequestContext, body: Static<typeof createSyncBody>): Promise<Reply> {
  const repo = ctx.repo!;
  if (!repo.upstream) throw invalid('the repository has no upstream configured; set one with PATCH first');
  const input: EnqueueSyncInput = { repo_id: repo.id, direction: body.direction, ref_globs: normalizeRefGlobs(body.ref_globs) };
  const reply = await callActor(ctx, repoActor(repo.id), 'sync.enqueue', input);
  wakeSyncActor();
  return reply;
}

/** Sync records of one repository, newest first, strictly before the cursor's sync id. */
function repoSyncs(ctx: RequestContext, repoId: string, before: string | undefined): Generator<SyncRecord> {
  return repoSyncsNewestFirst(ctx.services.storage.meta, repoId, before);
}

/** Sync records of the org's repositories this token may see, newest first. */
function* orgSyncs(ctx: RequestContext, before: string | undefined): Generator<SyncRecord> {
  const { meta } = ctx.services.storage;
  const visible = new Map<string, RepoRecord | null>();
  for (const { syncId, repoId } of orgSyncsNewestFirst(meta, ctx.org.id, before)) {
    let repo = visible.get(repoId);
    if (repo === undefined) {
      const record = getRepo(meta, repoId);
      repo = record && canAccessRepo(ctx.principal, record) ? record : null;
      visible.set(repoId, repo);
    }
    if (!repo) continue;
    const sync = getSync(meta, repoId, syncId);
    if (sync) yield sync;
  }
}

export const syncRoutes: RouteDef[] = [
  withBody(createSyncBody, {
    method: 'POST',
    path: '/{org}/{repo}/upstream/syncs',
    permission: 'git:write',
    actor: 'repo',
    handler: (ctx) => enqueue(ctx, ctx.body),
  }),
  {
    method: 'GET',
    path: '/{org}/{repo}/upstream/syncs',
    permission: 'git:read',
    query: { keys: { cursor: { type: 'string' }, limit: { type: 'int', min: 1, max: 200, default: 50 } } },
    handler(ctx) {
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const page = cursorPage(repoSyncs(ctx, ctx.repo!.id, cursor?.before), ctx.query.limit as number, syncView);
      return { status: 200, schema: 'syncPage', value: { syncs: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
  {
    method: 'GET',
    path: '/{org}/{repo}/upstream/syncs/{syncId}',
    permission: 'git:read',
    handler(ctx) {
      const record = getSync(ctx.services.storage.meta, ctx.repo!.id, ctx.params.syncId!);
      if (!record) throw notFound('NOT_FOUND', `sync "${ctx.params.syncId}" not found`);
      return { status: 200, schema: 'sync', value: syncView(record) };
    },
  },
  withBody(pushBody, {
    method: 'POST',
    path: '/{org}/{repo}/push',
    permission: 'git:write',
    actor: 'repo',
    handler: (ctx) => enqueue(ctx, { direction: 'push' }),
  }),
  {
    method: 'GET',
    path: '/{org}/sync-runs',
    permission: 'git:read',
    query: { keys: { cursor: { type: 'string' }, limit: { type: 'int', min: 1, max: 100, default: 50 }, repo: { type: 'string', minLength: 1, maxLength: 100 } } },
    handler(ctx) {
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const name = ctx.query.repo as string | undefined;
      let records: Iterable<SyncRecord>;
      if (name !== undefined) {
        // A filter, not a lookup: an unknown or out-of-reach repository lists nothing.
        const repo = getRepoByName(ctx.services.storage.meta, ctx.org.id, name);
        records = repo && canAccessRepo(ctx.principal, repo) ? repoSyncs(ctx, repo.id, cursor?.before) : [];
      } else {
        records = orgSyncs(ctx, cursor?.before);
      }
      const page = cursorPage(records, ctx.query.limit as number, syncRunView);
      return { status: 200, schema: 'syncRunPage', value: { sync_runs: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
];
