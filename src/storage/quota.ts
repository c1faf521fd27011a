import type { Database, Key } from 'lmdb';
import { ServiceError } from '../errors.js';
import { K } from './keys.js';
import { repoShard } from './shards.js';

/**
 * The org storage quota (`REPOHOST_ORG_QUOTA_BYTES`, API §12 `QUOTA_EXCEEDED`), the shard's side.
 * A write may touch only its repository's shard, so it is checked against an allowance kept on
 * that shard, `[shard, 'quota-allow', orgId]`: the bytes the org's ledger granted the shard
 * (quota-ledger.ts), the bytes the shard gave back, and the bytes the org's repositories on the
 * shard use. Each repository also counts its own bytes (`['r', repoId, 'bytes']`), which is what
 * deleting it takes off `used`. Both are updated in the transaction that stores or removes the
 * objects they count. An object counts its content size once, when the repository first stores
 * it (objects are deduplicated by oid per repository).
 *
 * `granted` and `returned` only grow, and each has one writer (the ledger grants, the shard
 * returns), so the two sides exchange absolute values and a lost or repeated message changes
 * nothing: the next exchange carries the newer value. Whatever a shard has not received yet or
 * the ledger has not heard back is counted as granted by the ledger, so the org's stored bytes
 * never exceed the quota; the cost is allowance in transit or unspent on other shards, which a
 * refill recalls (quota-refill.ts).
 */
type Meta = Database<unknown, Key>;

export interface ShardAllowance {
  granted: number;
  returned: number;
  used: number;
}

const EMPTY: ShardAllowance = { granted: 0, returned: 0, used: 0 };

export function shardAllowance(meta: Meta, shard: number, orgId: string): ShardAllowance {
  return (meta.get(K.quotaAllowance(shard, orgId)) as ShardAllowance | undefined) ?? EMPTY;
}

/** Bytes the org may still store on the shard (negative: used beyond what it was granted). */
export const roomOf = (a: ShardAllowance): number => a.granted - a.returned - a.used;

export function repoBytesUsed(meta: Meta, repoId: string): number {
  return (meta.get(K.repoBytes(repoId)) as number | undefined) ?? 0;
}

/**
 * The refusal a client sees. `used_bytes` is the quota minus what this write could use: the org's
 * stored bytes plus any allowance other shards hold at that moment.
 */
export function quotaFull(limit: number, room: number, requested: number): ServiceError {
  const used = Math.max(0, limit - Math.max(0, room));
  const need = requested > 0 ? `; this write needs ${requested} more` : '';
  return new ServiceError('QUOTA_EXCEEDED', `the org's storage quota is full (${used} of ${limit} bytes used${need})`, {
    quota_bytes: limit,
    used_bytes: used,
    requested_bytes: requested,
  });
}

/** The bytes a refusal of `quotaFull` lacked on its shard: what a refill asks the org for. */
export function shortfallOf(err: ServiceError): number {
  const d = (err.details ?? {}) as { quota_bytes?: number; used_bytes?: number; requested_bytes?: number };
  const room = (d.quota_bytes ?? 0) - (d.used_bytes ?? 0);
  return Math.max(1, (d.requested_bytes ?? 0) - room);
}

/** The refusal that stands when a refill left the org `short` of what `err` asked for. */
export function refusalAfterRefill(err: ServiceError, short: number): ServiceError {
  const d = (err.details ?? {}) as { quota_bytes?: number; requested_bytes?: number };
  const requested = d.requested_bytes ?? 0;
  return quotaFull(d.quota_bytes ?? 0, requested - short, requested);
}

/**
 * Refuses (413 QUOTA_EXCEEDED) when `bytes` more would not fit in the allowance of the
 * repository's shard: it has none left, or the addition would take it over. `limit` 0 is
 * unlimited.
 */
export function assertRoom(meta: Meta, orgId: string, repoId: string, limit: number, bytes: number): void {
  if (limit <= 0) return;
  const room = roomOf(shardAllowance(meta, repoShard(repoId), orgId));
  if (room <= 0 || bytes > room) throw quotaFull(limit, room, bytes);
}

/** Adds `bytes` (negative to give back) to the repository's counter and its shard's use, inside the caller's transaction. */
export function addBytes(meta: Meta, orgId: string, repoId: string, bytes: number): void {
  if (bytes === 0) return;
  const shard = repoShard(repoId);
  const a = shardAllowance(meta, shard, orgId);
  meta.putSync(K.quotaAllowance(shard, orgId), { ...a, used: Math.max(0, a.used + bytes) });
  meta.putSync(K.repoBytes(repoId), Math.max(0, repoBytesUsed(meta, repoId) + bytes));
}

/** Gives a deleted repository's bytes back to its shard's allowance (before its range is removed). */
export function releaseRepository(meta: Meta, orgId: string, repoId: string): void {
  const bytes = repoBytesUsed(meta, repoId);
  if (bytes === 0) return;
  const shard = repoShard(repoId);
  const a = shardAllowance(meta, shard, orgId);
  meta.putSync(K.quotaAllowance(shard, orgId), { ...a, used: Math.max(0, a.used - bytes) });
}

/** The shard takes a grant: `granted` is the ledger's total for it, newer or not than what it has. */
export function receiveGrant(meta: Meta, shard: number, orgId: string, granted: number): ShardAllowance {
  const a = shardAllowance(meta, shard, orgId);
  if (granted <= a.granted) return a;
  const next = { ...a, granted };
  meta.putSync(K.quotaAllowance(shard, orgId), next);
  return next;
}

/**
 * The shard gives back what it has not used (after taking the ledger's `granted`, which may
 * carry a grant it never received); returns its total returned, for the ledger.
 */
export function returnUnspent(meta: Meta, shard: number, orgId: string, granted: number): number {
  const a = receiveGrant(meta, shard, orgId, granted);
  const unspent = roomOf(a);
  if (unspent <= 0) return a.returned;
  meta.putSync(K.quotaAllowance(shard, orgId), { ...a, returned: a.returned + unspent });
  return a.returned + unspent;
}
