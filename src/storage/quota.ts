import type { Database, Key } from 'lmdb';
import { ServiceError } from '../errors.js';
import { K } from './keys.js';

/**
 * The org storage quota (`REPOHOST_ORG_QUOTA_BYTES`, API §12 `QUOTA_EXCEEDED`). Two counters in
 * `meta`, both updated in the transaction that stores or removes the objects they count:
 * `['quota', orgId]` (what the quota compares) and `['r', repoId, 'bytes']` (what deleting the
 * repository gives back). An object counts its content size once, when the repository first
 * stores it (objects are deduplicated by oid per repository).
 *
 * A missing counter is 0: data stored before the counters existed is not counted, rather than
 * summed by a scan of every object inside some write's transaction (which would hold LMDB's one
 * write lock for as long as the scan takes). The per-repository counter is what deletion
 * subtracts, so the org counter never goes below what was actually counted.
 */
type Meta = Database<unknown, Key>;

export function orgBytesUsed(meta: Meta, orgId: string): number {
  return (meta.get(K.orgBytes(orgId)) as number | undefined) ?? 0;
}

export function repoBytesUsed(meta: Meta, repoId: string): number {
  return (meta.get(K.repoBytes(repoId)) as number | undefined) ?? 0;
}

function quotaFull(limit: number, used: number, requested: number): ServiceError {
  const need = requested > 0 ? `; this write needs ${requested} more` : '';
  return new ServiceError('QUOTA_EXCEEDED', `the org's storage quota is full (${used} of ${limit} bytes used${need})`, {
    quota_bytes: limit,
    used_bytes: used,
    requested_bytes: requested,
  });
}

/**
 * Refuses (413 QUOTA_EXCEEDED) when `bytes` more would not fit: the org is already at or over
 * `limit`, or the addition would take it over. `limit` 0 is unlimited.
 */
export function assertRoom(meta: Meta, orgId: string, limit: number, bytes: number): void {
  if (limit <= 0) return;
  const used = orgBytesUsed(meta, orgId);
  if (used >= limit || used + bytes > limit) throw quotaFull(limit, used, bytes);
}

/** Adds `bytes` (negative to give back) to both counters, inside the caller's transaction. */
export function addBytes(meta: Meta, orgId: string, repoId: string, bytes: number): void {
  if (bytes === 0) return;
  meta.putSync(K.orgBytes(orgId), Math.max(0, orgBytesUsed(meta, orgId) + bytes));
  meta.putSync(K.repoBytes(repoId), Math.max(0, repoBytesUsed(meta, repoId) + bytes));
}

/** Gives a deleted repository's bytes back to its org (before its range is removed). */
export function releaseRepository(meta: Meta, orgId: string, repoId: string): void {
  const bytes = repoBytesUsed(meta, repoId);
  if (bytes > 0) meta.putSync(K.orgBytes(orgId), Math.max(0, orgBytesUsed(meta, orgId) - bytes));
}
