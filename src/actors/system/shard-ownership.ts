import { SHARD_COUNT } from '../shard-map.js';

/**
 * The shards this node serves, whose queues its system actors drain: a shard's outbox, webhook
 * deliveries and sync queue are written only by its owner, so only the owner fans them out, sends
 * them, runs them and records their outcomes (a write elsewhere would be a commit outside the
 * shard's log). One node owns all 256; in cluster mode the placement says, and changes as shards
 * move.
 */
export interface ShardOwnership {
  owns(shard: number): boolean;
  /** The shards owned now, ascending. */
  ownedShards(): readonly number[];
  /** Calls `listener` with the shards gained and lost at each change; returns the unsubscribe. */
  onChange(listener: (granted: readonly number[], revoked: readonly number[]) => void): () => void;
}

/** An ownership set by its holder: every shard on a single node, the placement's in cluster mode. */
export class OwnedShards implements ShardOwnership {
  private owned: Set<number>;
  private sorted: number[];
  private readonly listeners = new Set<(granted: readonly number[], revoked: readonly number[]) => void>();

  constructor(shards: Iterable<number> = allShards()) {
    this.owned = checkedShards(shards);
    this.sorted = [...this.owned].sort((a, b) => a - b);
  }

  owns(shard: number): boolean {
    return this.owned.has(shard);
  }

  ownedShards(): readonly number[] {
    return this.sorted;
  }

  onChange(listener: (granted: readonly number[], revoked: readonly number[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Replaces the owned set; tells the listeners what changed, if anything did. */
  set(shards: Iterable<number>): void {
    const next = checkedShards(shards);
    const granted = [...next].filter((s) => !this.owned.has(s)).sort((a, b) => a - b);
    const revoked = this.sorted.filter((s) => !next.has(s));
    this.owned = next;
    this.sorted = [...next].sort((a, b) => a - b);
    if (granted.length || revoked.length) for (const listener of this.listeners) listener(granted, revoked);
  }

  grant(...shards: number[]): void {
    this.set([...this.owned, ...shards]);
  }

  revoke(...shards: number[]): void {
    this.set(this.sorted.filter((s) => !shards.includes(s)));
  }
}

export const allShards = (): number[] => Array.from({ length: SHARD_COUNT }, (_, shard) => shard);

/** The shard numbers given, as a set; throws on one that names no shard. */
export function checkedShards(shards: Iterable<number>): Set<number> {
  const set = new Set(shards);
  for (const shard of set) if (!Number.isInteger(shard) || shard < 0 || shard >= SHARD_COUNT) throw new RangeError(`no shard ${shard}`);
  return set;
}
