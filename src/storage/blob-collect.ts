import type { Database, Key } from 'lmdb';
import type { Storage } from './database.js';
import { NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import { removeUploadSync } from './blob-store.js';
import { decodeObjectValue } from './git-object-store.js';
import { idTime } from './ids.js';
import { K, lastPart, Ranges, repoOfShardEntry } from './keys.js';
import { getPending, pendingOf } from './pending-objects.js';
import { addBytes } from './quota.js';
import type { RepoRecord, SyncRecord } from './records.js';

/**
 * Collection of what nothing references (API §5.4: "unreferenced blobs are collected after
 * 24 h"): objects still pending after the retention (uploads never used, objects of a pull that
 * never applied) and the chunks of uploads that never committed. The deleting functions run
 * inside the owning repository actor's transaction (blob-collect command), so they serialize
 * with the writes that could reference the same objects; finding candidates is a read anyone can
 * do (the collector on the main thread).
 */
type Meta = Database<unknown, Key>;

/**
 * Repositories of `shards` with pending objects or staged uploads from before `cutoff` (ms), each
 * with the ids of its old staged uploads; `lastActivity` tells when an upload this process is
 * still streaming last received bytes (it counts from then, not from its start).
 */
export function findCollectable(meta: Meta, shards: Iterable<number>, cutoff: number, lastActivity: (uploadId: string) => number | undefined): Map<string, string[]> {
  const repos = new Map<string, string[]>();
  for (const shard of shards) {
    for (const { key, value } of meta.getRange(Ranges.shardPending(shard))) {
      const repoId = repoOfShardEntry(key);
      if (!repos.has(repoId) && (value as { at: number }).at <= cutoff) repos.set(repoId, []);
    }
    for (const { key, value } of meta.getRange(Ranges.shardStaged(shard))) {
      const uploadId = lastPart(key);
      if (idTime(uploadId) > cutoff || (lastActivity(uploadId) ?? 0) > cutoff) continue;
      const repoId = value as string;
      let uploads = repos.get(repoId);
      if (!uploads) repos.set(repoId, (uploads = []));
      uploads.push(uploadId);
    }
  }
  return repos;
}

/** Deletes a stored object and its chunks; returns the content size it counted for. */
function deleteObject(storage: Storage, repoId: string, oid: string): number {
  const key = K.object(repoId, oid);
  const value = storage.objects.get(key);
  if (!value) return 0;
  const info = decodeObjectValue(oid, value);
  if (info.chunked) removeUploadSync(storage, repoId, info.chunked.u);
  storage.objects.removeSync(key);
  return info.size;
}

/** A pull still queued or running will reference what its fetch stored: not garbage yet. */
function syncUnfinished(meta: Meta, repoId: string, syncId: string): boolean {
  const status = (meta.get(K.sync(repoId, syncId)) as SyncRecord | undefined)?.status;
  return status === 'queued' || status === 'in_progress';
}

export interface CollectResult {
  objects: number;
  bytes: number;
  uploads: number;
  /** More objects were due than one turn collects. */
  more: boolean;
}

/**
 * Inside the repository actor's transaction: deletes up to `limit` objects pending since before
 * `cutoff`, with their chunks, and gives their bytes back to the quota; then the staged chunks of
 * the given uploads if those are still uncommitted and older than the cutoff.
 */
export function collectRepository(storage: Storage, repoId: string, cutoff: number, uploadIds: readonly string[], limit: number): CollectResult {
  const { meta } = storage;
  const result: CollectResult = { objects: 0, bytes: 0, uploads: 0, more: false };
  const due: string[] = [];
  for (const { oid, mark } of pendingOf(meta, repoId)) {
    if (mark.at > cutoff || (mark.sync !== null && syncUnfinished(meta, repoId, mark.sync))) continue;
    if (due.length === limit) {
      result.more = true;
      break;
    }
    due.push(oid);
  }
  for (const oid of due) {
    result.bytes += deleteObject(storage, repoId, oid);
    meta.removeSync(K.pending(repoId, oid));
    result.objects++;
  }
  const repo = meta.get(K.repo(repoId)) as RepoRecord | undefined;
  if (repo) addBytes(meta, repo.org_id, repoId, -result.bytes);
  for (const uploadId of uploadIds) {
    // Re-checked here: the upload may have committed since the collector looked.
    if (meta.get(K.stagedUpload(repoId, uploadId)) !== repoId || idTime(uploadId) > cutoff) continue;
    removeUploadSync(storage, repoId, uploadId);
    result.uploads++;
  }
  return result;
}

/**
 * Takes back what a refused fetch stored in its earlier batches (the pull stores nothing when the
 * quota refuses it): the objects it stored new that are still pending under its sync. Anything a
 * write referenced meanwhile has lost its mark and stays.
 */
export function discardFetched(storage: Storage, repoId: string, syncId: string, oids: readonly string[]): void {
  const { meta } = storage;
  storage.root.transactionSync(() => {
    let bytes = 0;
    for (const oid of oids) {
      if (getPending(meta, repoId, oid)?.sync !== syncId) continue;
      bytes += deleteObject(storage, repoId, oid);
      meta.removeSync(K.pending(repoId, oid));
    }
    const repo = meta.get(K.repo(repoId)) as RepoRecord | undefined;
    if (repo) addBytes(meta, repo.org_id, repoId, -bytes);
  }, NESTABLE_COMMIT_THEN_SYNC);
}
