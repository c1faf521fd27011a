import { countOrgRepos, getRepo, orgRepoIds } from '../storage/repo-store.js';
import { orgRepoIdsBy, sortListed, type ListOrder } from '../storage/repo-saga-store.js';
import { repoRecordKey } from '../storage/read/gathered-keys.js';
import type { RepoRecord } from '../storage/records.js';
import { canAccessRepo } from './auth/principal.js';
import { reachableRepoIds } from './auth/restriction-reads.js';
import { readerFor } from './shard-reads.js';
import type { RequestContext } from './route.js';

/** Splits items into runs of `size` (Infinity: one run), read lazily. */
export function* runs<T>(items: Iterable<T>, size: number): Generator<T[]> {
  let run: T[] = [];
  for (const item of items) {
    run.push(item);
    if (run.length >= size) {
      yield run;
      run = [];
    }
  }
  if (run.length) yield run;
}

/**
 * The records of the org's repositories `ids` lists (from the org shard's index) that the token
 * reaches, in that order. In a cluster they are read `batch` ids at a time, each batch one
 * request per node holding some of them: a page asks for one more than it shows, and asks again
 * only when the token's reach or a filter left out some.
 */
export async function* reachableRepos(ctx: RequestContext, ids: Iterable<string>, batch: number): AsyncGenerator<RepoRecord> {
  let first = true;
  for (const run of runs(ids, batch)) {
    // A walk through many repositories (a filter that matches few) lets other requests run between
    // its batches, and stops if its client has gone.
    if (!first) await ctx.connection.connectionSettled();
    first = false;
    const reader = await readerFor(ctx.services, () => run.map(repoRecordKey));
    for (const id of run) {
      const repo = getRepo(reader, id);
      if (repo && canAccessRepo(ctx.principal, repo)) yield repo;
    }
  }
}

/*
 * The ids a list of the org walks: the org's whole list, or for a repository-restricted token
 * only the few it reaches, ordered alike (never the whole list filtered by the token).
 */

/** All of them in `order`. */
export async function listedIds(ctx: RequestContext, order: ListOrder): Promise<Iterable<string>> {
  const meta = ctx.services.storage.meta;
  const reachable = await reachableRepoIds(ctx.services, ctx.principal);
  return reachable === null ? orgRepoIdsBy(meta, ctx.org.id, order) : sortListed(meta, ctx.org.id, reachable, order);
}

/**
 * `size` of them in `order` from position `skip`, and how many there are: found by position in
 * the order kept as keys, so what a page costs does not grow with the org.
 */
export async function listedPage(ctx: RequestContext, order: ListOrder, skip: number, size: number): Promise<{ ids: string[]; total: number }> {
  const meta = ctx.services.storage.meta;
  const reachable = await reachableRepoIds(ctx.services, ctx.principal);
  if (reachable === null) return { ids: [...orgRepoIdsBy(meta, ctx.org.id, order, skip, size)], total: countOrgRepos(meta, ctx.org.id) };
  const all = sortListed(meta, ctx.org.id, reachable, order);
  return { ids: all.slice(skip, skip + size), total: all.length };
}

/** Newest first, after the id `after` when given (a cursor's place). */
export async function listedIdsAfter(ctx: RequestContext, after?: string): Promise<Iterable<string>> {
  const meta = ctx.services.storage.meta;
  const reachable = await reachableRepoIds(ctx.services, ctx.principal);
  if (reachable === null) return orgRepoIds(meta, ctx.org.id, after);
  const newestFirst = sortListed(meta, ctx.org.id, reachable, 'newest-first');
  return after === undefined ? newestFirst : newestFirst.filter((id) => id < after);
}

/** Every repository of `ids` the token reaches (one gather in a cluster). */
export async function allReachableRepos(ctx: RequestContext, ids: Iterable<string>): Promise<RepoRecord[]> {
  const repos: RepoRecord[] = [];
  for await (const repo of reachableRepos(ctx, ids, Infinity)) repos.push(repo);
  return repos;
}
