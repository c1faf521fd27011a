import type { Key } from 'lmdb';
import { repoActor } from '../actors/actor-names.js';
import { COMMIT_THEN_SYNC } from './commit-flags.js';
import type { Storage } from './database.js';
import { K } from './keys.js';
import type { GrantLedgerEntry } from './quota-ledger.js';
import { repoBytesUsed, shardAllowance } from './quota.js';
import { orgRepoIds } from './repo-store.js';
import { repoShard } from './shards.js';

/**
 * Once, at start-up: a data directory written with one org-wide counter (`['quota', orgId]`)
 * gets per-shard allowances instead. Each shard is granted exactly what the org's repositories
 * on it use, so the org's stored bytes are what they were and the rest of the quota stays with
 * the ledger. One transaction: a crash leaves the old counter, and the next start does it again.
 */
export function migrateOrgQuota(storage: Storage): void {
  const { meta } = storage;
  const legacy = [...meta.getKeys({ start: K.legacyOrgBytes(''), end: K.legacyOrgBytes('\uffff') })] as Key[];
  if (legacy.length === 0) return;
  storage.root.transactionSync(() => {
    for (const key of legacy) {
      const orgId = (key as string[])[1]!;
      const perShard = new Map<number, { bytes: number; repoId: string }>();
      for (const repoId of orgRepoIds(meta, orgId)) {
        const bytes = repoBytesUsed(meta, repoId);
        if (bytes === 0) continue;
        const shard = repoShard(repoId);
        perShard.set(shard, { bytes: (perShard.get(shard)?.bytes ?? 0) + bytes, repoId });
      }
      for (const [shard, { bytes, repoId }] of perShard) {
        const a = shardAllowance(meta, shard, orgId);
        meta.putSync(K.quotaAllowance(shard, orgId), { granted: a.granted + bytes, returned: a.returned, used: a.used + bytes });
        const entry = meta.get(K.quotaGrant(orgId, shard)) as GrantLedgerEntry | undefined;
        meta.putSync(K.quotaGrant(orgId, shard), { granted: (entry?.granted ?? 0) + bytes, returned: entry?.returned ?? 0, actor: repoActor(repoId) });
      }
      meta.removeSync(key);
    }
  }, COMMIT_THEN_SYNC);
}
