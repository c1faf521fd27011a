/**
 * Verified tokens, bounded by the bytes they hold rather than by their count: every distinct
 * valid token (a fresh `jti` per request is legal) adds an entry, so a count limit alone would let
 * one key holder fill memory with large tokens. Oldest entries go first (insertion order; a hit
 * does not reorder — a token used again is re-verified at worst once per eviction).
 */
export interface Sized {
  /** Approximate bytes the value holds beyond the cache's own bookkeeping. */
  readonly bytes: number;
}

/** Map entry, key and bookkeeping overhead per token, measured roughly with V8's heap snapshots. */
const ENTRY_OVERHEAD = 160;

export class TokenCache<V extends Sized> {
  private readonly entries = new Map<string, V>();
  private used = 0;

  constructor(private readonly budgetBytes: number) {}

  get size(): number {
    return this.entries.size;
  }

  /** Bytes accounted to the entries held now. */
  get bytes(): number {
    return this.used;
  }

  get(token: string): V | undefined {
    return this.entries.get(token);
  }

  set(token: string, value: V): void {
    const cost = entryCost(token, value);
    if (cost > this.budgetBytes) return;
    this.delete(token);
    this.entries.set(token, value);
    this.used += cost;
    for (const [oldest, v] of this.entries) {
      if (this.used <= this.budgetBytes) break;
      this.entries.delete(oldest);
      this.used -= entryCost(oldest, v);
    }
  }

  delete(token: string): void {
    const value = this.entries.get(token);
    if (value === undefined) return;
    this.entries.delete(token);
    this.used -= entryCost(token, value);
  }
}

function entryCost(token: string, value: Sized): number {
  return ENTRY_OVERHEAD + token.length + value.bytes;
}
