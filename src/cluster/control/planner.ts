import type { ShardPlacement } from '../placement.js';
import { MOVE_READY_LAG, type ShardProgress } from './records.js';
import { rendezvousRank } from './rendezvous.js';

/**
 * The controller's decisions, as a pure function of what it sees: the live nodes, the drain
 * requests, the placement table and the followers' progress. It returns the placement writes of
 * one round; the controller applies each with a compare-and-swap on the entry's mod_revision.
 *
 * - Failures first, at once: a shard whose owner is gone gets a live follower as owner, epoch + 1
 *   (the best ranked of those caught up, else the least behind); dead followers are replaced.
 *   Nothing waits for stability here.
 * - Unplaced shards (a new cluster) are placed by rendezvous rank once the membership is stable.
 * - Rebalancing towards the rendezvous targets (joins, drains) only when the membership has been
 *   stable for the debounce period and no node is suspect, and at most `maxMoves` shards are
 *   written per round and at most `maxMoves` are in motion at any time (a node added to them, as
 *   a move's target or a new follower, has not caught up yet). A move is graceful: the
 *   target is added as a follower, and ownership flips (epoch + 1) only once the target reports
 *   it has caught up; extra followers are dropped only once the desired ones have caught up.
 * - Whatever `maxMoves` allows, one node is catching up at most CATCH_UPS_PER_NODE new copies at
 *   a time: a joining node handed ~200 at once spent its event loop starting tails and applying
 *   logs, missed its lease renewals and left the cluster before any flip.
 */

/** New copies (move targets, new followers) one node may be catching up at once. */
export const CATCH_UPS_PER_NODE = 16;

export interface PlanInput {
  shardCount: number;
  /** Ids of the nodes holding a live lease. */
  live: string[];
  /** Nodes asked to drain: they get nothing new and lose what they hold. */
  draining: ReadonlySet<string>;
  placement(shard: number): { value: ShardPlacement; modRevision: string } | undefined;
  progress(node: string, shard: number): ShardProgress | undefined;
  /** Copies of each shard: the owner and replicas − 1 followers. */
  replicas: number;
  maxMoves: number;
  /** The membership has not changed for the debounce period. */
  stable: boolean;
  /** No live node is suspect (a lease that missed its renewals). */
  calm: boolean;
}

export type WriteReason = 'place' | 'promote' | 'repair' | 'move-follow' | 'move-flip' | 'follow' | 'trim';

export interface PlacementWrite {
  shard: number;
  /** The entry's mod_revision the write expects, '0' for an entry that does not exist yet. */
  expected: string;
  next: ShardPlacement;
  reason: WriteReason;
}

export function planPlacement(input: PlanInput): PlacementWrite[] {
  const live = new Set(input.live);
  const eligibleIds = input.live.filter((id) => !input.draining.has(id));
  // When every node drains there is nowhere else to go: keep serving where they are.
  const eligible = (eligibleIds.length ? eligibleIds : input.live).map((id) => ({ id }));
  const want = input.replicas - 1;
  const writes: PlacementWrite[] = [];
  const touched = new Set<number>();
  if (eligible.length === 0) return writes;
  const rankOf = (shard: number): string[] => rendezvousRank(eligible, shard);
  const ready = (node: string, shard: number, epoch: number): boolean => {
    const p = input.progress(node, shard);
    return p !== undefined && p.epoch === epoch && p.lag <= MOVE_READY_LAG;
  };
  const fill = (followers: string[], owner: string, rank: string[]): string[] => {
    const out = followers.filter((f) => f !== owner);
    for (const id of rank) {
      if (out.length >= want) break;
      if (id !== owner && !out.includes(id)) out.push(id);
    }
    return out;
  };
  const push = (shard: number, expected: string, next: ShardPlacement, reason: WriteReason): void => {
    writes.push({ shard, expected, next, reason });
    touched.add(shard);
  };

  // Failures: promote and repair now.
  for (let shard = 0; shard < input.shardCount; shard++) {
    const entry = input.placement(shard);
    if (!entry) continue;
    const { owner, epoch, followers } = entry.value;
    const liveFollowers = followers.filter((f) => live.has(f));
    if (!live.has(owner)) {
      const rank = rankOf(shard);
      // The best-ranked follower that is caught up (so no later move undoes the choice), else
      // the least behind. Behind is judged by the reported lag and by the applied sequence
      // against the best follower's: a follower whose tail is not running (or has not probed the
      // log yet) reports no lag, and promoting it costs a catch-up of the whole log.
      const progressOf = (f: string): ShardProgress | null => {
        const p = input.progress(f, shard);
        return p && p.epoch === epoch ? p : null;
      };
      const mostApplied = Math.max(0, ...liveFollowers.map((f) => progressOf(f)?.applied ?? 0));
      const behind = (f: string): number => {
        const p = progressOf(f);
        return p ? Math.max(p.lag, mostApplied - p.applied) : Number.MAX_SAFE_INTEGER;
      };
      const position = (f: string): number => (rank.includes(f) ? rank.indexOf(f) : rank.length);
      const key = (f: string): number => (behind(f) <= MOVE_READY_LAG ? position(f) : rank.length + behind(f));
      const heir = [...liveFollowers].sort((a, b) => key(a) - key(b) || position(a) - position(b))[0] ?? rank[0]!;
      push(shard, entry.modRevision, { owner: heir, epoch: epoch + 1, followers: fill(liveFollowers, heir, rank) }, 'promote');
    } else if (liveFollowers.length !== followers.length) {
      push(shard, entry.modRevision, { owner, epoch, followers: fill(liveFollowers, owner, rankOf(shard)) }, 'repair');
    }
  }
  if (!input.stable) return writes;

  // A new cluster: place every unplaced shard at once.
  for (let shard = 0; shard < input.shardCount; shard++) {
    if (input.placement(shard)) continue;
    const rank = rankOf(shard);
    push(shard, '0', { owner: rank[0]!, epoch: 1, followers: rank.slice(1, 1 + want) }, 'place');
  }
  if (!input.calm) return writes;

  // Rebalancing: finish moves in motion, then start new ones, then settle followers. A shard is in
  // motion while a node added to it (a move's target or a new follower) has not caught up.
  let budget = input.maxMoves;
  const candidates: Array<{ shard: number; entry: { value: ShardPlacement; modRevision: string }; rank: string[] }> = [];
  for (let shard = 0; shard < input.shardCount; shard++) {
    const entry = input.placement(shard);
    if (!entry || touched.has(shard)) continue;
    candidates.push({ shard, entry, rank: rankOf(shard) });
  }
  // Per node, the new copies it is still catching up; a shard with any is in motion.
  const catchingUp = new Map<string, number>();
  const room = (id: string): boolean => (catchingUp.get(id) ?? 0) < CATCH_UPS_PER_NODE;
  const take = (id: string): void => void catchingUp.set(id, (catchingUp.get(id) ?? 0) + 1);
  let inMotion = 0;
  for (const c of candidates) {
    const { owner, epoch, followers } = c.entry.value;
    const added = owner === c.rank[0] ? c.rank.slice(1, 1 + want) : [c.rank[0]!];
    const behind = added.filter((id) => followers.includes(id) && !ready(id, c.shard, epoch));
    behind.forEach(take);
    if (behind.length) inMotion++;
  }
  const moving = candidates.filter(({ entry, rank }) => entry.value.owner !== rank[0]);
  for (const { shard, entry, rank } of moving) {
    const { owner, epoch, followers } = entry.value;
    const target = rank[0]!;
    if (budget <= 0) break;
    if (!followers.includes(target) || !ready(target, shard, epoch)) continue;
    const warm = [owner, ...followers].filter((id) => id !== target && live.has(id) && !input.draining.has(id));
    const desired = rank.slice(1, 1 + want);
    const kept = [...desired.filter((id) => warm.includes(id)), ...warm.filter((id) => !desired.includes(id))].slice(0, want);
    push(shard, entry.modRevision, { owner: target, epoch: epoch + 1, followers: kept }, 'move-flip');
    budget--;
  }
  for (const { shard, entry, rank } of moving) {
    if (budget <= 0 || inMotion >= input.maxMoves) break;
    if (touched.has(shard) || entry.value.followers.includes(rank[0]!) || !room(rank[0]!)) continue;
    push(shard, entry.modRevision, { ...entry.value, followers: [...entry.value.followers, rank[0]!] }, 'move-follow');
    take(rank[0]!);
    budget--;
    inMotion++;
  }
  for (const { shard, entry, rank } of candidates) {
    if (budget <= 0) break;
    const { owner, epoch, followers } = entry.value;
    if (touched.has(shard) || owner !== rank[0]) continue;
    const desired = rank.slice(1, 1 + want);
    const missing = desired.filter((id) => !followers.includes(id));
    const adding = missing.filter(room);
    if (adding.length && inMotion < input.maxMoves) {
      push(shard, entry.modRevision, { owner, epoch, followers: [...followers, ...adding] }, 'follow');
      adding.forEach(take);
      budget--;
      inMotion++;
    } else if (!missing.length && followers.length !== desired.length && desired.every((id) => ready(id, shard, epoch))) {
      push(shard, entry.modRevision, { owner, epoch, followers: desired }, 'trim');
      budget--;
    }
  }
  return writes;
}
