import type { Database, Key } from 'lmdb';
import { K, Ranges } from './keys.js';

/**
 * The org's side of the quota: on the org's shard, a ledger entry per shard it granted
 * allowance to (`[orgShard, 'quota-grant', orgId, shard]`). `granted` is everything ever granted
 * to that shard, `returned` the shard's own total of what it gave back as last heard (quota.ts);
 * the difference is what the shard holds, used or not. The ledger never lets the sum of those
 * differences exceed the quota: that is the bound on the org's stored bytes.
 */
type Meta = Database<unknown, Key>;

export interface GrantLedgerEntry {
  granted: number;
  returned: number;
  /** An actor on that shard, to address a recall to (the repository that last asked). */
  actor: string;
}

/** A shard's allowance the ledger can call back: its total grant and the actor that reaches it. */
export interface Holder {
  shard: number;
  granted: number;
  actor: string;
}

export type GrantAnswer = { granted: number } | { short: number; holders: Holder[] };

/**
 * Grants are at least a 64th of the quota, so a shard that writes steadily asks the org about
 * once per 64th of the quota it stores, not once per write.
 */
export const grantChunk = (limit: number): number => Math.ceil(limit / 64);

function entries(meta: Meta, orgId: string): Array<{ shard: number; entry: GrantLedgerEntry }> {
  return [...meta.getRange(Ranges.quotaGrants(orgId))].map(({ key, value }) => ({ shard: (key as unknown[])[3] as number, entry: value as GrantLedgerEntry }));
}

/** Notes a shard's total returned (absolute, so a repeated or late report changes nothing). */
export function creditReturn(meta: Meta, orgId: string, shard: number, returned: number): void {
  const entry = meta.get(K.quotaGrant(orgId, shard)) as GrantLedgerEntry | undefined;
  if (!entry || returned <= entry.returned) return;
  meta.putSync(K.quotaGrant(orgId, shard), { ...entry, returned: Math.min(returned, entry.granted) });
}

/**
 * Grants `shard` at least `need` bytes more (a chunk when there is room for it), or answers how
 * short the org is and which other shards hold allowance it could recall.
 */
export function grant(meta: Meta, orgId: string, limit: number, shard: number, actor: string, need: number): GrantAnswer {
  const all = entries(meta, orgId);
  const room = limit - all.reduce((n, { entry }) => n + entry.granted - entry.returned, 0);
  if (room < need) {
    const holders = all.filter((e) => e.shard !== shard && e.entry.granted > e.entry.returned).map((e) => ({ shard: e.shard, granted: e.entry.granted, actor: e.entry.actor }));
    return { short: need - room, holders };
  }
  const mine = all.find((e) => e.shard === shard)?.entry ?? { granted: 0, returned: 0, actor };
  const granted = mine.granted + Math.max(need, Math.min(grantChunk(limit), room));
  meta.putSync(K.quotaGrant(orgId, shard), { ...mine, granted, actor });
  return { granted };
}
