import type { ShardProgress } from '../control/records.js';
import type { PlacementView } from '../placement.js';

/**
 * How far the owner of a shard may trim its log: to the lowest position every follower the
 * placement names reports as applied (node-replicas.ts reports only positions synced to disk),
 * so every copy placed can still read what it misses from the log, and the entries dropped are
 * on the disk of every copy. Null while a follower placed has not reported the shard (a node
 * that is down keeps the log from being trimmed until the controller replaces it; the copy that
 * replaces it is seeded from a peer). With no follower, the owner's own copy is the bound.
 *
 * The owner calls it once a second (its progress round) and trims a shard only after appending
 * REPOHOST_LOG_TRIM_ENTRIES entries since the last trim: one trim per that many writes.
 */
export function logTrimFloor(view: PlacementView, progressOf: (node: string, shard: number) => ShardProgress | undefined, shard: number): number | null {
  const placement = view.shard(shard);
  if (!placement || placement.owner !== view.localNodeId) return null;
  let floor = Number.MAX_SAFE_INTEGER;
  for (const follower of placement.followers) {
    const progress = progressOf(follower, shard);
    if (!progress) return null;
    floor = Math.min(floor, progress.applied);
  }
  return floor;
}
