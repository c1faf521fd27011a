import { countOrgRepos } from '../../storage/repo-store.js';
import { isListed } from '../../storage/repo-saga-store.js';
import { reachableRepoIds } from '../auth/restriction-reads.js';
import { scopeNamesFor } from '../auth/permissions.js';
import type { RequestContext, RouteDef } from '../route.js';

/**
 * The org's count, or for a restricted token the repositories it reaches that the org lists: a
 * restriction names a few, so they are looked up instead of the org's whole list walked.
 */
async function countVisible(ctx: RequestContext): Promise<number> {
  const meta = ctx.services.storage.meta;
  const reachable = await reachableRepoIds(ctx.services, ctx.principal);
  if (reachable === null) return countOrgRepos(meta, ctx.org.id);
  return reachable.filter((id) => isListed(meta, ctx.org.id, id)).length;
}

export const orgRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/whoami',
    permission: 'repo:read',
    handler: async (ctx) => ({
      status: 200,
      schema: 'whoami',
      value: {
        org: { id: ctx.org.id, slug: ctx.org.slug, name: ctx.org.name },
        signing_key: { id: ctx.principal.key.id, name: ctx.principal.key.name },
        scopes: scopeNamesFor(ctx.principal.permissions),
        repo_ids: await reachableRepoIds(ctx.services, ctx.principal),
      },
    }),
  },
  {
    method: 'GET',
    path: '/{org}',
    permission: 'repo:read',
    handler: async (ctx) => ({
      status: 200,
      schema: 'organization',
      value: { id: ctx.org.id, slug: ctx.org.slug, name: ctx.org.name, created_at: ctx.org.created_at, num_repos: await countVisible(ctx) },
    }),
  },
];
