import { repoIdByName } from '../../storage/repo-store.js';
import { repoNameKey, repoRecordKey } from '../../storage/read/gathered-keys.js';
import type { RepoRecord } from '../../storage/records.js';
import type { Services } from '../services.js';
import { allowedRepoIds, claimedNames, isRestricted, mayRenameRepo, type Principal } from './principal.js';

/**
 * A repository-restricted token's checks, wherever the request is served. They read the org's
 * name index (the org's shard) and repository records (each on its own shard); on a single node
 * all are local, in a cluster they are gathered from the owners in two rounds: the names, then
 * the records of the ids found.
 */

type Reads = Pick<Services, 'storage' | 'shardReads'>;

/** `allowedRepoIds` with what it reads gathered from the shards' owners. */
export async function reachableRepoIds(services: Reads, p: Principal): Promise<string[] | null> {
  if (!isRestricted(p)) return null;
  if (!services.shardReads) return allowedRepoIds(services.storage.meta, p);
  const nameKeys = claimedNames(p).map((name) => repoNameKey(p.org.id, name));
  const index = await services.shardReads.gather(nameKeys);
  const ids = new Set([...(p.key.repo_ids ?? []), ...(p.repoIds ?? [])]);
  for (const name of claimedNames(p)) {
    const id = repoIdByName(index, p.org.id, name);
    if (id !== undefined) ids.add(id);
  }
  if (ids.size === 0) return [];
  return allowedRepoIds(await services.shardReads.gather([...nameKeys, ...[...ids].map(repoRecordKey)]), p);
}

/** `mayRenameRepo` with the name's holder gathered from the shards' owners. */
export async function mayRenameRepoTo(services: Reads, p: Principal, repo: Pick<RepoRecord, 'id'>, name: string): Promise<boolean> {
  if (!isRestricted(p) || !services.shardReads) return mayRenameRepo(services.storage.meta, p, repo, name);
  const nameKey = repoNameKey(p.org.id, name);
  const holder = repoIdByName(await services.shardReads.gather([nameKey]), p.org.id, name);
  return mayRenameRepo(await services.shardReads.gather(holder === undefined ? [nameKey] : [nameKey, repoRecordKey(holder)]), p, repo, name);
}
