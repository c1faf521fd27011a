import { invalid, notFound } from '../../errors.js';
import type { Static } from '@sinclair/typebox';
import { createSyncBody, pushBody } from '../../protocol/schemas/syncs.js';
import { syncRunView, syncView } from '../../protocol/views/sync.js';
import { getSync, orgSyncsNewestFirst, repoSyncsNewestFirst } from '../../storage/sync-store.js';
import type { SyncRecord } from '../../storage/records.js';
import { getRepo, getRepoByName, repoIdByName } from '../../storage/repo-store.js';
import { repoRecordKey, syncRecordKey } from '../../storage/read/gathered-keys.js';
import { readerFor } from '../shard-reads.js';
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

/**
 * Up to `count` sync records of the org's repositories this token may see, newest first, from
 * the org's sync list (its shard), optionally only one repository's. In a cluster the records
 * are gathered from the repositories' shards `count` entries at a time.
 */
async function orgSyncs(ctx: RequestContext, before: string | undefined, count: number, onlyRepo?: string): Promise<SyncRecord[]> {
  const visible = new Map<string, boolean>();
  const found: SyncRecord[] = [];
  let run: { syncId: string; repoId: string }[] = [];
  const take = async (): Promise<void> => {
    const reader = await readerFor(ctx.services, () => [...new Set(run.map((e) => e.repoId))].filter((id) => !visible.has(id)).map(repoRecordKey).concat(run.map((e) => syncRecordKey(e.repoId, e.syncId))));
    for (const { syncId, repoId } of run) {
      if (!visible.has(repoId)) {
        const record = getRepo(reader, repoId);
        visible.set(repoId, record !== undefined && canAccessRepo(ctx.principal, record));
      }
      const sync = visible.get(repoId) ? getSync(reader, repoId, syncId) : undefined;
      if (sync && found.length < count) found.push(sync);
    }
    run = [];
  };
  for (const entry of orgSyncsNewestFirst(ctx.services.storage.meta, ctx.org.id, before)) {
    if (onlyRepo !== undefined && entry.repoId !== onlyRepo) continue;
    run.push(entry);
    if (run.length === count) {
      await take();
      if (found.length === count) return found;
    }
  }
  if (run.length) await take();
  return found;
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
    async handler(ctx) {
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const name = ctx.query.repo as string | undefined;
      const limit = ctx.query.limit as number;
      let records: Iterable<SyncRecord>;
      if (name === undefined) {
        records = await orgSyncs(ctx, cursor?.before, limit + 1);
      } else if (ctx.services.shardReads) {
        // The repository's own sync list is on its shard: its entries of the org's list instead.
        const id = repoIdByName(ctx.services.storage.meta, ctx.org.id, name);
        records = id === undefined ? [] : await orgSyncs(ctx, cursor?.before, limit + 1, id);
      } else {
        // A filter, not a lookup: an unknown or out-of-reach repository lists nothing.
        const repo = getRepoByName(ctx.services.storage.meta, ctx.org.id, name);
        records = repo && canAccessRepo(ctx.principal, repo) ? repoSyncs(ctx, repo.id, cursor?.before) : [];
      }
      const page = cursorPage(records, limit, syncRunView);
      return { status: 200, schema: 'syncRunPage', value: { sync_runs: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
];
