import type { Database, Key } from 'lmdb';
import { SHARD_COUNT } from '../actors/shard-map.js';
import { K, lastPart, Ranges, type KeyRange } from './keys.js';
import { firstOf } from './merge-ordered.js';
import { newestFirst, newestFirstAcross, type ListEntry } from './newest-first.js';
import { orgRepoIds } from './repo-store.js';
import { repoShard } from './shards.js';
import type { RecordReader } from './read/record-cache.js';
import type { SyncRecord } from './records.js';

/**
 * Upstream sync records (API §9): each repository's syncs, the org's index of them (sync runs:
 * each shard lists the org's syncs of its repositories, so that only the repository's actor
 * writes it), the queue of unfinished syncs in enqueue order, and the repository's cleanup index.
 */
type Meta = Database<unknown, Key>;

/** The copy of a repository's newest sync that its view shows (`upstream.latest_sync`). */
export interface LatestSync {
  id: string;
  status: string;
}

export function getSync(meta: RecordReader, repoId: string, syncId: string): SyncRecord | undefined {
  return meta.get(K.sync(repoId, syncId)) as SyncRecord | undefined;
}

export function saveSyncRecord(meta: Meta, record: SyncRecord): void {
  meta.putSync(K.sync(record.repo_id, record.id), record);
}

export function getLatestSync<T extends LatestSync>(meta: RecordReader, repoId: string): T | undefined {
  return meta.get(K.latestSync(repoId)) as T | undefined;
}

/** Keeps `view` as the repository's latest sync unless a newer sync is there already. */
export function offerLatestSync(meta: Meta, repoId: string, view: LatestSync): void {
  const latest = getLatestSync(meta, repoId);
  if (!latest || latest.id <= view.id) meta.putSync(K.latestSync(repoId), view);
}

/** Indexes a new sync: in the org's runs, at the end of the queue, and for the repository's cleanup. */
export function indexNewSync(meta: Meta, record: SyncRecord): void {
  meta.putSync(K.orgSync(record.org_id, record.repo_id, record.id), record.repo_id);
  meta.putSync(K.syncQueue(record.repo_id, record.id), record.repo_id);
  meta.putSync(K.repoSyncIndex(record.repo_id, record.id), record.org_id);
}

export function dequeueSync(meta: Meta, repoId: string, syncId: string): void {
  meta.removeSync(K.syncQueue(repoId, syncId));
}

/** Removes a deleted repository's syncs from the org's runs and the queue (its own range goes with it). */
export function unindexRepoSyncs(meta: Meta, orgId: string, repoId: string): void {
  for (const key of meta.getKeys(Ranges.repoSyncIndex(repoId))) {
    const syncId = lastPart(key);
    meta.removeSync(K.orgSync(orgId, repoId, syncId));
    meta.removeSync(K.syncQueue(repoId, syncId));
    meta.removeSync(key);
  }
}

/** Unfinished syncs (queued or running). */
/** Unfinished syncs (queued or running) in `shards`. */
export function syncQueueLength(meta: Meta, shards: Iterable<number>): number {
  let n = 0;
  for (const shard of shards) n += meta.getKeysCount(Ranges.shardSyncQueue(shard));
  return n;
}

/**
 * Each repository's oldest unfinished sync in `shards`, oldest first: the queue's heads, in the
 * order they were enqueued. Each shard keeps its repositories' queues (a repository's in enqueue
 * order).
 */
export function syncQueueHeads(meta: Meta, shards: Iterable<number>): Array<{ syncId: string; repoId: string }> {
  const heads: Array<{ syncId: string; repoId: string }> = [];
  for (const shard of shards) {
    let previous: string | null = null;
    for (const { key, value } of meta.getRange(Ranges.shardSyncQueue(shard))) {
      const repoId = value as string;
      if (repoId !== previous) heads.push({ syncId: lastPart(key), repoId });
      previous = repoId;
    }
  }
  return heads.sort((a, b) => (a.syncId < b.syncId ? -1 : a.syncId > b.syncId ? 1 : 0));
}

/** A repository's syncs, newest first, strictly before `before` when given (an empty one starts at the newest). */
export function* repoSyncsNewestFirst(meta: Meta, repoId: string, before?: string): Generator<SyncRecord> {
  for (const { value } of newestFirst(meta, Ranges.syncs(repoId), before || undefined)) yield value as SyncRecord;
}

/** A repository's syncs as a list kept on its shard (records under their ids), for `newestOf`. */
export const repoSyncList = (repoId: string): KeyRange => Ranges.syncs(repoId);

export const syncOfEntry = ({ value }: ListEntry): SyncRecord => value as SyncRecord;

/** An entry of the org's sync runs: the sync and its repository. */
export interface OrgSyncEntry {
  syncId: string;
  repoId: string;
}

/**
 * Up to this many repositories, an org's sync runs are read from the shards its repositories are
 * on; beyond, from every shard. Each shard read costs a seek even when it holds nothing of the
 * org (256 of them cost about 1 ms), reading the repository list costs a key per repository, and
 * 256 repositories cover about 160 shards anyway (docs/measurements/2026-11-27-sync-runs-per-shard.md).
 */
const SHARDS_FROM_REPOS_UP_TO = 256;

/**
 * The lists that make up the org's sync runs, one per shard that may hold some (`orgSyncEntry`
 * reads their entries): those of the shards the org's repositories are on, from its repository
 * list (on the org's shard), or every shard's for an org of many repositories. The list holds
 * every repository that can have syncs: a name finds a repository (and a sync can be enqueued)
 * only once it is listed, and its syncs go when a delete's second step runs, after its entry.
 */
export function orgSyncLists(meta: Meta, orgId: string): KeyRange[] {
  const repoIds = firstOf(orgRepoIds(meta, orgId), SHARDS_FROM_REPOS_UP_TO + 1);
  const shards = repoIds.length > SHARDS_FROM_REPOS_UP_TO ? Array.from({ length: SHARD_COUNT }, (_, shard) => shard) : [...new Set(repoIds.map(repoShard))];
  return shards.map((shard) => Ranges.shardOrgSyncs(shard, orgId));
}

export const orgSyncEntry = ({ id, value }: ListEntry): OrgSyncEntry => ({ syncId: id, repoId: value as string });

/** The org's syncs (their ids and repositories), newest first, strictly before `before` when given. */
export function* orgSyncsNewestFirst(meta: Meta, orgId: string, before?: string): Generator<OrgSyncEntry> {
  for (const entry of newestFirstAcross(meta, orgSyncLists(meta, orgId), before)) yield orgSyncEntry(entry);
}
