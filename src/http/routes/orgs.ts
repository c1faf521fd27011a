import { getRepo, orgRepoIds, countOrgRepos } from '../../storage/repo-store.js';
import { allowedRepoIds, canAccessRepo, isRestricted } from '../auth/principal.js';
import { scopeNamesFor } from '../auth/permissions.js';
import type { RequestContext, RouteDef } from '../route.js';

// Kept importable from here for the routes that used it before it moved beside the principal.
export { allowedRepoIds };

function countVisible(ctx: RequestContext): number {
  const meta = ctx.services.storage.meta;
  if (!isRestricted(ctx.principal)) return countOrgRepos(meta, ctx.org.id);
  let n = 0;
  for (const id of orgRepoIds(meta, ctx.org.id)) {
    const repo = getRepo(meta, id);
    if (repo && canAccessRepo(ctx.principal, repo)) n++;
  }
  return n;
}

export const orgRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/whoami',
    permission: 'repo:read',
    handler: (ctx) => ({
      status: 200,
      schema: 'whoami',
      value: {
        org: { id: ctx.org.id, slug: ctx.org.slug, name: ctx.org.name },
        signing_key: { id: ctx.principal.key.id, name: ctx.principal.key.name },
        scopes: scopeNamesFor(ctx.principal.permissions),
        repo_ids: allowedRepoIds(ctx.services.storage, ctx.principal),
      },
    }),
  },
  {
    method: 'GET',
    path: '/{org}',
    permission: 'repo:read',
    handler: (ctx) => ({
      status: 200,
      schema: 'organization',
      value: { id: ctx.org.id, slug: ctx.org.slug, name: ctx.org.name, created_at: ctx.org.created_at, num_repos: countVisible(ctx) },
    }),
  },
];
