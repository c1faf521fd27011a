import { getRepo, getRepoByName, orgRepoIds, countOrgRepos } from '../../storage/repo-store.js';
import { canAccessRepo, isRestricted, type Principal } from '../auth/principal.js';
import { scopeNamesFor } from '../auth/permissions.js';
import type { RequestContext, RouteDef } from '../route.js';
import type { Storage } from '../../storage/database.js';

/** Repository ids a restricted principal may reach (null when unrestricted). */
export function allowedRepoIds(storage: Storage, p: Principal): string[] | null {
  if (!isRestricted(p)) return null;
  let ids: string[] | null = p.key.repo_ids ? [...p.key.repo_ids] : null;
  const narrow = (next: string[]): void => {
    ids = ids ? ids.filter((id) => next.includes(id)) : next;
  };
  if (p.repoIds) narrow(p.repoIds);
  if (p.repoNames) {
    const resolved: string[] = [];
    for (const full of p.repoNames) {
      const [slug, name] = full.split('/');
      if (slug !== p.org.slug || !name) continue;
      const repo = getRepoByName(storage.meta, p.org.id, name);
      if (repo) resolved.push(repo.id);
    }
    narrow(resolved);
  }
  return ids;
}

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
