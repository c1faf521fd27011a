import type { Key } from 'lmdb';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { RepoRecord } from '../records.js';
import { K } from '../keys.js';

/**
 * The keys an org-level read fetches from the repositories' shards in a cluster (http/shard-reads.ts),
 * listed beside the readers that use them: repo-store.ts, sync-store.ts, webhook-store.ts and the
 * repository views.
 */

export const repoRecordKey = (repoId: string): Key => K.repo(repoId);

export const repoNameKey = (orgId: string, name: string): Key => K.repoName(orgId, name);

export const syncRecordKey = (repoId: string, syncId: string): Key => K.sync(repoId, syncId);

export const latestSyncKey = (repoId: string): Key => K.latestSync(repoId);

/** What `repositoryView` reads besides the record: the default bookmark and the latest sync. */
export const repositoryViewKeys = (repo: RepoRecord): Key[] => [K.bookmark(repo.id, repo.default_bookmark), K.latestSync(repo.id)];

/** Where a target's delivery may be kept: any shard's log, as its id does not say which (`findDelivery`). */
export const deliveryRecordKeys = (targetId: string, deliveryId: string): Key[] => Array.from({ length: SHARD_COUNT }, (_, shard) => K.webhookDelivery(shard, targetId, deliveryId));
