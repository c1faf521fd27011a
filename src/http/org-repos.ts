import { getRepo } from '../storage/repo-store.js';
import { repoRecordKey } from '../storage/read/gathered-keys.js';
import type { RepoRecord } from '../storage/records.js';
import { canAccessRepo } from './auth/principal.js';
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
  for (const run of runs(ids, batch)) {
    const reader = await readerFor(ctx.services, () => run.map(repoRecordKey));
    for (const id of run) {
      const repo = getRepo(reader, id);
      if (repo && canAccessRepo(ctx.principal, repo)) yield repo;
    }
  }
}

/** Every repository of `ids` the token reaches (one gather in a cluster). */
export async function allReachableRepos(ctx: RequestContext, ids: Iterable<string>): Promise<RepoRecord[]> {
  const repos: RepoRecord[] = [];
  for await (const repo of reachableRepos(ctx, ids, Infinity)) repos.push(repo);
  return repos;
}
