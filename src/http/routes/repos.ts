import { checkBookmarkName, checkRepoName, checkTagKeys } from '../../protocol/names.js';
import { createRepoBody, patchRepoBody, type UpstreamInput } from '../../protocol/schemas/repos.js';
import { repositoryJson, repositoryListItem, repositoryView } from '../../protocol/views/repository.js';
import { getRepo } from '../../storage/repo-store.js';
import type { ListOrder } from '../../storage/repo-saga-store.js';
import { latestSyncKey, repositoryViewKeys } from '../../storage/read/gathered-keys.js';
import type { RepoRecord } from '../../storage/records.js';
import type { CreateRepoInput, UpdateRepoInput } from '../../actors/commands/repos.js';
import { checkUrlAddress, checkUrlForm } from '../../net/address-policy.js';
import { ServiceError } from '../../errors.js';
import { isRestricted } from '../auth/principal.js';
import { mayRenameRepoTo } from '../auth/restriction-reads.js';
import { allReachableRepos, listedIds, listedIdsAfter, listedPage, reachableRepos } from '../org-repos.js';
import { readerFor } from '../shard-reads.js';
import { relay, stepCaller } from '../actor-call.js';
import { createRepository, deleteRepository, updateRepository } from '../../actors/repo-saga.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { parseTagFilter } from '../tag-filter.js';
import { withBody, type RequestContext, type RouteDef } from '../route.js';

/**
 * Repository routes (API §4). Reads are served here from an LMDB snapshot (in a cluster, the
 * listings gather the repositories' records from their shards' owners: shard-reads.ts); writes
 * run the sagas of actors/repo-saga.ts.
 */

/** Records a filtered list reads between turns of the event loop. */
const FILTER_BATCH = 256;
/** Records a filtered cursor page reads per item it may show, before it ends short with a cursor. */
const SCAN_PER_ITEM = 100;

async function checkUpstream(ctx: RequestContext, upstream: UpstreamInput): Promise<void> {
  const url = checkUrlForm(upstream.url, 'upstream url');
  await checkUrlAddress(url, ctx.services.config.allowPrivateUpstreams, 'upstream url');
}

/** A repository-list cursor: the id of the last repository of the previous page. */
const isRepoCursor = (v: Record<string, unknown>): v is { after: string } => typeof v.after === 'string' && /^repo_[0-9A-HJKMNP-TV-Z]{26}$/.test(v.after);

/** The path's repository's name as its record has it now (a concurrent rename may change it). */
const currentName =
  (ctx: RequestContext) =>
  (): string | undefined =>
    getRepo(ctx.services.records, ctx.repo!.id)?.name;

export const repoRoutes: RouteDef[] = [
  withBody(createRepoBody, {
    method: 'POST',
    path: '/{org}/repos',
    permission: 'repo:create',
    actor: 'org',
    async handler(ctx) {
      // It could not reach what it made (API §2), and a 409 would tell it which names exist.
      if (isRestricted(ctx.principal)) throw new ServiceError('FORBIDDEN', 'a token restricted to repositories cannot create repositories');
      const { body } = ctx;
      if (body.name != null) checkRepoName(body.name);
      const defaultBookmark = body.default_bookmark ?? 'main';
      checkBookmarkName(defaultBookmark);
      if (body.tags) checkTagKeys(body.tags);
      if (body.upstream) await checkUpstream(ctx, body.upstream);
      const input: CreateRepoInput = {
        org_id: ctx.org.id,
        name: body.name ?? null,
        default_bookmark: defaultBookmark,
        tags: body.tags ?? {},
        upstream: body.upstream ?? null,
      };
      return relay(await createRepository(stepCaller(ctx), input));
    },
  }),
  {
    method: 'GET',
    path: '/{org}/repos',
    permission: 'repo:read',
    query: { keys: { cursor: { type: 'string' }, limit: { type: 'int', min: 1, max: 100, default: 50 }, tags: { type: 'string' } } },
    async handler(ctx) {
      const filter = parseTagFilter(ctx.query.tags as string | undefined, 'tags');
      const cursor = decodeCursor(ctx.query.cursor, isRepoCursor);
      const limit = ctx.query.limit as number;
      const page: RepoRecord[] = [];
      let hasMore = false;
      // The last repository this page is done with: where the next one starts. A filter that
      // matches few reads many records: a page reads at most SCAN_PER_ITEM per item it may show.
      let passed: string | undefined;
      let read = 0;
      for await (const repo of reachableRepos(ctx, await listedIdsAfter(ctx, cursor?.after), filter ? Math.min(FILTER_BATCH, limit * SCAN_PER_ITEM + 1) : limit + 1)) {
        if (filter && ++read > limit * SCAN_PER_ITEM && passed !== undefined) {
          hasMore = true;
          break;
        }
        if (filter && !filter(repo.tags)) {
          passed = repo.id;
          continue;
        }
        if (page.length === limit) {
          hasMore = true;
          break;
        }
        page.push(repo);
        passed = repo.id;
      }
      const reader = await readerFor(ctx.services, () => page.flatMap(repositoryViewKeys));
      return {
        status: 200,
        schema: 'repositoryPage',
        value: {
          repos: page.map((repo) => repositoryView(reader, repo, ctx.org, ctx.services.config.publicUrl)),
          next_cursor: hasMore && passed ? encodeCursor({ after: passed }) : null,
          has_more: hasMore,
        },
      };
    },
  },
  {
    method: 'GET',
    path: '/{org}/repos/list',
    permission: 'repo:read',
    query: {
      keys: {
        page: { type: 'int', min: 1, max: 1_000_000, default: 1 },
        pageSize: { type: 'int', min: 1, max: 100, default: 25 },
        sortBy: { type: 'string', enum: ['name', 'created_at'], default: 'created_at' },
        sortOrder: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
        metadata: { type: 'string' },
      },
    },
    async handler(ctx) {
      const filter = parseTagFilter(ctx.query.metadata as string | undefined, 'metadata');
      const order: ListOrder = { by: ctx.query.sortBy as 'name' | 'created_at', desc: ctx.query.sortOrder === 'desc' };
      const page = ctx.query.page as number;
      const size = ctx.query.pageSize as number;
      const skip = (page - 1) * size;
      let shown: RepoRecord[];
      let total: number;
      if (!filter) {
        const listed = await listedPage(ctx, order, skip, size);
        shown = await allReachableRepos(ctx, listed.ids);
        total = listed.total;
      } else {
        // The total counts every match: a filter reads each listed record, in batches between other requests.
        shown = [];
        total = 0;
        for await (const repo of reachableRepos(ctx, await listedIds(ctx, order), FILTER_BATCH)) {
          if (!filter(repo.tags)) continue;
          if (total >= skip && shown.length < size) shown.push(repo);
          total++;
        }
      }
      const reader = await readerFor(ctx.services, () => shown.map((r) => latestSyncKey(r.id)));
      return {
        status: 200,
        schema: 'repositoryNumberedPage',
        value: {
          repos: shown.map((r) => repositoryListItem(reader, r)),
          total,
          page,
          page_size: size,
          total_pages: Math.ceil(total / size),
        },
      };
    },
  },
  {
    method: 'GET',
    path: '/{org}/{repo}',
    permission: 'repo:read',
    handler: (ctx) => ({ status: 200, json: repositoryJson(ctx.services.records, ctx.repo!, ctx.org, ctx.services.config.publicUrl) }),
  },
  withBody(patchRepoBody, {
    method: 'PATCH',
    path: '/{org}/{repo}',
    permission: 'repo:update',
    actor: 'org',
    async handler(ctx) {
      const { body } = ctx;
      const input: UpdateRepoInput = { repo_id: ctx.repo!.id };
      if (body.name != null) {
        checkRepoName(body.name);
        if (!(await mayRenameRepoTo(ctx.services, ctx.principal, ctx.repo!, body.name))) throw new ServiceError('FORBIDDEN', 'this token may not give the repository that name');
        input.name = body.name;
      }
      if (body.default_bookmark != null) input.default_bookmark = body.default_bookmark;
      if (body.tags != null) {
        checkTagKeys(body.tags);
        input.tags = body.tags;
      }
      if (body.upstream !== undefined) {
        if (body.upstream) await checkUpstream(ctx, body.upstream);
        input.upstream = body.upstream;
      }
      return relay(await updateRepository(stepCaller(ctx), ctx.org.id, currentName(ctx), input));
    },
  }),
  {
    method: 'DELETE',
    path: '/{org}/{repo}',
    permission: 'repo:delete',
    handler: async (ctx) => relay(await deleteRepository(stepCaller(ctx), ctx.org.id, ctx.repo!.id, currentName(ctx))),
  },
];
