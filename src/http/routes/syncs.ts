import { invalid, notFound } from '../../errors.js';
import type { Static } from '@sinclair/typebox';
import { createSyncBody, pushBody } from '../../protocol/schemas/syncs.js';
import { syncRunView, syncView } from '../../protocol/views/sync.js';
import { getSync, orgSyncEntry, orgSyncLists, orgSyncsNewestFirst, repoSyncList, repoSyncsNewestFirst, syncOfEntry, type OrgSyncEntry } from '../../storage/sync-store.js';
import type { SyncRecord } from '../../storage/records.js';
import { getRepo, repoIdByName } from '../../storage/repo-store.js';
import { repoRecordKey, syncRecordKey } from '../../storage/read/gathered-keys.js';
import { runs } from '../org-repos.js';
import { newestOf, readerFor } from '../shard-reads.js';
import type { EnqueueSyncInput } from '../../actors/commands/syncs.js';
import { wakeSyncActor } from '../../actors/system/sync/index.js';
import { normalizeRefGlobs } from '../../actors/system/sync/ref-filter.js';
import { canAccessRepo } from '../auth/principal.js';
import { reachableRepoIds } from '../auth/restriction-reads.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { cursorPage, decodeCursor, hasString } from '../cursor.js';
import { withBody, type Reply, type RequestContext, type RouteDef } from '../route.js';

/**
 * Upstream sync routes (API §9). Enqueueing goes through the repository's actor (which writes
 * the record and its `sync.queued` event) and then wakes the sync actor; reads are served here
 * from an LMDB snapshot, newest first, with cursors that are sync ids (ULIDs sort by creation).
 * The org's sync runs are kept per shard (each shard lists the org's syncs of its repositories),
 * so a listing merges every shard's list.
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
 * The org's sync runs newest first, strictly before `before`, in runs of `count` entries: on a
 * single node read lazily from every shard's list, in a cluster `count` at a time from the lists'
 * owners (one request per node).
 */
async function* orgSyncRuns(ctx: RequestContext, before: string | undefined, count: number): AsyncGenerator<OrgSyncEntry[]> {
  const { services } = ctx;
  if (!services.shardReads) {
    yield* runs(orgSyncsNewestFirst(services.storage.meta, ctx.org.id, before), count);
    return;
  }
  const lists = orgSyncLists(services.storage.meta, ctx.org.id);
  for (let after = before; ; ) {
    const run = (await newestOf(services, lists, count, after)).map(orgSyncEntry);
    if (run.length) yield run;
    if (run.length < count) return;
    after = run[run.length - 1]!.syncId;
  }
}

/**
 * Up to `count` sync records of the org's repositories this token may see, newest first. In a
 * cluster each run's records are gathered from the repositories' shards. A restricted token's
 * come from its repositories' own lists, not from the org's filtered (which could hold
 * thousands of other repositories' syncs before one of its own).
 */
async function orgSyncs(ctx: RequestContext, before: string | undefined, count: number): Promise<SyncRecord[]> {
  const reachable = await reachableRepoIds(ctx.services, ctx.principal);
  if (reachable !== null) return (await newestOf(ctx.services, reachable.map(repoSyncList), count, before)).map(syncOfEntry);
  const visible = new Map<string, boolean>();
  const found: SyncRecord[] = [];
  for await (const run of orgSyncRuns(ctx, before, count)) {
    const reader = await readerFor(ctx.services, () => [...new Set(run.map((e) => e.repoId))].filter((id) => !visible.has(id)).map(repoRecordKey).concat(run.map((e) => syncRecordKey(e.repoId, e.syncId))));
    for (const { syncId, repoId } of run) {
      if (!visible.has(repoId)) {
        const record = getRepo(reader, repoId);
        visible.set(repoId, record !== undefined && canAccessRepo(ctx.principal, record));
      }
      const sync = visible.get(repoId) ? getSync(reader, repoId, syncId) : undefined;
      if (sync && found.length < count) found.push(sync);
    }
    if (found.length === count) return found;
  }
  return found;
}

/**
 * Up to `count` sync records of the repository the org names `name`, newest first, if this
 * token may see it (a filter, not a lookup: an unknown or out-of-reach repository lists nothing).
 * Its own list, on its shard, is read: from that shard's owner in a cluster.
 */
async function namedRepoSyncs(ctx: RequestContext, name: string, before: string | undefined, count: number): Promise<SyncRecord[]> {
  const id = repoIdByName(ctx.services.storage.meta, ctx.org.id, name);
  if (id === undefined) return [];
  const repo = getRepo(await readerFor(ctx.services, () => [repoRecordKey(id)]), id);
  if (!repo || !canAccessRepo(ctx.principal, repo)) return [];
  return (await newestOf(ctx.services, [repoSyncList(id)], count, before)).map(syncOfEntry);
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
      // An empty position starts at the newest, as for a repository's own list.
      const before = decodeCursor(ctx.query.cursor, hasString('before'))?.before || undefined;
      const name = ctx.query.repo as string | undefined;
      const limit = ctx.query.limit as number;
      const records = name === undefined ? await orgSyncs(ctx, before, limit + 1) : await namedRepoSyncs(ctx, name, before, limit + 1);
      const page = cursorPage(records, limit, syncRunView);
      return { status: 200, schema: 'syncRunPage', value: { sync_runs: page.items, next_cursor: page.next_cursor, has_more: page.has_more } };
    },
  },
];
