import { orgRepoIds, countOrgRepos } from '../../storage/repo-store.js';
import { isRestricted } from '../auth/principal.js';
import { reachableRepoIds } from '../auth/restriction-reads.js';
import { allReachableRepos } from '../org-repos.js';
import { scopeNamesFor } from '../auth/permissions.js';
import type { RequestContext, RouteDef } from '../route.js';

async function countVisible(ctx: RequestContext): Promise<number> {
  const meta = ctx.services.storage.meta;
  if (!isRestricted(ctx.principal)) return countOrgRepos(meta, ctx.org.id);
  return (await allReachableRepos(ctx, orgRepoIds(meta, ctx.org.id))).length;
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
