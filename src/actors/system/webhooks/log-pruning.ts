import type { Storage } from '../../../storage/database.js';
import type { OrgDirectory } from '../../../storage/org-directory.js';
import { idTime } from '../../../storage/ids.js';
import { deliveryLog, removeFinishedDelivery } from '../../../storage/webhook-store.js';

/** Delivery log pruning (API §11.4: finished deliveries are kept 7 days). */

/** Finished delivery records removed per transaction. */
const PRUNE_BATCH = 1000;

/**
 * Drops finished deliveries created before `cutoff` from every target's log; stops between
 * batches once `stopped()` holds. Returns how many were removed.
 */
export async function pruneDeliveryLog(storage: Storage, directory: OrgDirectory, cutoff: number, stopped: () => boolean = () => false): Promise<number> {
  const { meta, root } = storage;
  let removed = 0;
  for (const { id: orgId } of [...directory.orgs()]) {
    for (const target of directory.targets(orgId)) {
      for (;;) {
        // Delivery ids sort by creation time: the old ones are a prefix of the range. Keys are
        // collected before the (async) removal, never removed while the range is iterated.
        const stale: string[] = [];
        for (const d of deliveryLog(meta, orgId, target.id)) {
          if (idTime(d.id) >= cutoff || stale.length === PRUNE_BATCH) break;
          if (d.status !== 'pending') stale.push(d.id);
        }
        if (!stale.length || stopped()) break;
        removed += await root.transaction(() => {
          let n = 0;
          for (const id of stale) if (removeFinishedDelivery(meta, orgId, target.id, id)) n++;
          return n;
        });
        if (stale.length < PRUNE_BATCH) break;
      }
    }
  }
  return removed;
}
