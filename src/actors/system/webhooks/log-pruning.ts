import type { Storage } from '../../../storage/database.js';
import { idTime } from '../../../storage/ids.js';
import { removeFinishedDelivery, shardDeliveryLog, shardDeliveryTargets } from '../../../storage/webhook-store.js';
import type { ShardOwnership } from '../shard-ownership.js';

/** Delivery log pruning (API §11.4: finished deliveries are kept 7 days). */

/** Finished delivery records removed per transaction. */
const PRUNE_BATCH = 1000;

/**
 * Drops finished deliveries created before `cutoff` from every target's log on the shards owned
 * (each owner prunes its own); stops between batches once `stopped()` holds. Returns how many
 * were removed.
 */
export async function pruneDeliveryLog(storage: Storage, ownership: ShardOwnership, cutoff: number, stopped: () => boolean = () => false): Promise<number> {
  const { meta, root } = storage;
  let removed = 0;
  for (const shard of ownership.ownedShards()) {
    for (const { targetId } of [...shardDeliveryTargets(meta, shard)]) {
      for (;;) {
        // Delivery ids sort by creation time: the old ones are a prefix of the range. Keys are
        // collected before the (async) removal, never removed while the range is iterated.
        const stale: string[] = [];
        for (const d of shardDeliveryLog(meta, shard, targetId)) {
          if (idTime(d.id) >= cutoff || stale.length === PRUNE_BATCH) break;
          if (d.status !== 'pending') stale.push(d.id);
        }
        if (!stale.length || stopped()) break;
        removed += await root.transaction(() => {
          // Checked in the transaction: a shard lost meanwhile is its new owner's to prune.
          if (!ownership.owns(shard)) return 0;
          let n = 0;
          for (const id of stale) if (removeFinishedDelivery(meta, shard, targetId, id)) n++;
          return n;
        });
        if (stale.length < PRUNE_BATCH) break;
      }
      if (stopped()) return removed;
    }
  }
  return removed;
}
