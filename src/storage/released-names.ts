import type { Database, Key } from 'lmdb';
import { IDEMPOTENCY_TTL_MS } from './idempotency-store.js';
import { K, Ranges } from './keys.js';

type Meta = Database<unknown, Key>;

/**
 * Names repositories gave up (renamed away or deleted), each with the repository that held it,
 * on the org's shard, for as long as an Idempotency-Key binds. A repeat of a repository write is
 * addressed by the name the first request used, and its record is on that repository's shard:
 * these entries lead the front end there when the name has since gone or passed to another
 * repository, so the repeat is replayed, not applied again.
 */
export function noteReleasedName(meta: Meta, orgId: string, name: string, repoId: string, now: number): void {
  // Expired entries of the name go in the same write, so a name's list stays as short as its last 24 h.
  const expired = [...meta.getRange(Ranges.releasedNames(orgId, name))].filter(({ value }) => now - (value as number) >= IDEMPOTENCY_TTL_MS);
  for (const { key } of expired) meta.removeSync(key);
  meta.putSync(K.releasedName(orgId, name, repoId), now);
}

/** The repositories that gave up `name` in the last 24 h. */
export function recentHoldersOf(meta: Meta, orgId: string, name: string, now: number): string[] {
  const holders: string[] = [];
  for (const { key, value } of meta.getRange(Ranges.releasedNames(orgId, name))) {
    if (now - (value as number) < IDEMPOTENCY_TTL_MS) holders.push((key as string[])[5]!);
  }
  return holders;
}
