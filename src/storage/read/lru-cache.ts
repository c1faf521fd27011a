interface Entry<V> {
  value: V;
  weight: number;
}

/**
 * A map that forgets what was not used recently, bounded by entry count and by total weight
 * (bytes). The read path caches immutable things in it — objects and views keyed by their oid —
 * so entries never go stale; they only age out.
 *
 * Two generations instead of an exact recency order: a hit in the young generation costs one map
 * lookup (an exact LRU re-inserts on every hit, which showed in profiles of cached reads); a hit
 * in the old one moves the entry up. When the young generation fills half the bounds it becomes
 * the old one and the previous old one is dropped, so an entry unused for a whole generation goes.
 */
export class LruCache<V> {
  private young = new Map<string, Entry<V>>();
  private old = new Map<string, Entry<V>>();
  private youngWeight = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxWeight: number,
    private readonly weigh: (value: V) => number,
  ) {}

  get(key: string): V | undefined {
    const hit = this.young.get(key);
    if (hit) return hit.value;
    const aged = this.old.get(key);
    if (!aged) return undefined;
    this.old.delete(key);
    this.insert(key, aged);
    return aged.value;
  }

  set(key: string, value: V): void {
    const weight = this.weigh(value);
    if (weight > this.maxWeight / 2) return;
    this.old.delete(key);
    this.insert(key, { value, weight });
  }

  delete(key: string): void {
    const young = this.young.get(key);
    if (young) {
      this.young.delete(key);
      this.youngWeight -= young.weight;
    }
    this.old.delete(key);
  }

  private insert(key: string, entry: Entry<V>): void {
    const previous = this.young.get(key);
    if (previous) this.youngWeight -= previous.weight;
    this.young.set(key, entry);
    this.youngWeight += entry.weight;
    if (this.young.size > this.maxEntries / 2 || this.youngWeight > this.maxWeight / 2) {
      this.old = this.young;
      this.young = new Map();
      this.youngWeight = 0;
    }
  }
}
