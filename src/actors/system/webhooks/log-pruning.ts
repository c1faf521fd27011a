import type { Key } from 'lmdb';
import type { Storage } from '../../../storage/database.js';
import { under } from '../../../storage/keys.js';
import { idTime } from '../../../storage/ids.js';
import { orgTargets, type DeliveryRecord } from './records.js';

/** Delivery log pruning (API §11.4: finished deliveries are kept 7 days). */

/** Finished delivery records removed per transaction. */
const PRUNE_BATCH = 1000;

/**
 * Drops finished deliveries created before `cutoff` from every target's log; stops between
 * batches once `stopped()` holds. Returns how many were removed.
 */
export async function pruneDeliveryLog(storage: Storage, cutoff: number, stopped: () => boolean = () => false): Promise<number> {
  const { meta, root } = storage;
  let removed = 0;
  for (const orgKey of [...meta.getKeys(under(['org']))]) {
    const orgId = (orgKey as string[])[1]!;
    for (const target of [...orgTargets(meta, orgId)]) {
      for (;;) {
        // Delivery ids sort by creation time: the old ones are a prefix of the range. Keys are
        // collected before the (async) removal, never removed while the range is iterated.
        const stale: Key[] = [];
        for (const { key, value } of meta.getRange(under(['o', orgId, 'whd', target.id]))) {
          const d = value as DeliveryRecord;
          if (idTime(d.id) >= cutoff || stale.length === PRUNE_BATCH) break;
          if (d.status !== 'pending') stale.push(key);
        }
        if (!stale.length || stopped()) break;
        removed += await root.transaction(() => {
          let n = 0;
          for (const key of stale) {
            const current = meta.get(key) as DeliveryRecord | undefined;
            if (current && current.status !== 'pending') {
              meta.removeSync(key);
              n++;
            }
          }
          return n;
        });
        if (stale.length < PRUNE_BATCH) break;
      }
    }
  }
  return removed;
}
