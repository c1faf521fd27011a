/**
 * A set of object ids as one sorted run of their 20 bytes: what a reachable set keeps
 * (reachable-sets.ts) for as long as it is cached, at 24 bytes an object — an open-addressing
 * table would take two to four times that. An oid is found by a binary search on the first four
 * bytes of each (SHA-1 bytes are uniform: they nearly always decide), kept apart as numbers. Each
 * oid carries one flag bit, so a caller can mark a kind of object (commits) without a second set.
 *
 * Sorted by oid, a pack's reads of the repository's objects also go in the order of their LMDB
 * keys (`[repoId, oid]`), leaf page after leaf page.
 */
import type { OidList } from './oid-list.js';

const OID_BYTES = 20;

export class SortedOids {
  /** The first four bytes of each oid, big-endian. */
  private readonly prefixes: Uint32Array;

  private constructor(
    private readonly bytes: Buffer,
    private readonly flags: Uint8Array,
    readonly length: number,
  ) {
    this.prefixes = new Uint32Array(length);
    for (let i = 0; i < length; i++) this.prefixes[i] = bytes.readUInt32BE(i * OID_BYTES);
  }

  /** The oids of `list` (distinct), sorted; `flagged(i)` says which of the list's entries carry the flag. */
  static from(list: OidList, flagged: (index: number) => boolean): SortedOids {
    const n = list.length;
    const raw = list.raw;
    const prefix = new Uint32Array(n);
    for (let i = 0; i < n; i++) prefix[i] = raw.readUInt32BE(i * OID_BYTES);
    const order = Array.from({ length: n }, (_, i) => i);
    order.sort((a, b) => prefix[a]! - prefix[b]! || compareOids(raw, a * OID_BYTES, raw, b * OID_BYTES));
    const bytes = Buffer.allocUnsafe(n * OID_BYTES);
    const flags = new Uint8Array((n + 7) >> 3);
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      raw.copy(bytes, k * OID_BYTES, i * OID_BYTES, (i + 1) * OID_BYTES);
      if (flagged(i)) flags[k >> 3]! |= 1 << (k & 7);
    }
    return new SortedOids(bytes, flags, n);
  }

  /** Both sets in one, each oid once (with the flag it has in either). */
  merge(other: SortedOids): SortedOids {
    const bytes = Buffer.allocUnsafe((this.length + other.length) * OID_BYTES);
    const flags = new Uint8Array((this.length + other.length + 7) >> 3);
    let i = 0;
    let j = 0;
    let k = 0;
    const take = (from: SortedOids, index: number, flagged: boolean): void => {
      from.bytes.copy(bytes, k * OID_BYTES, index * OID_BYTES, (index + 1) * OID_BYTES);
      if (flagged || from.flagged(index)) flags[k >> 3]! |= 1 << (k & 7);
      k++;
    };
    while (i < this.length || j < other.length) {
      const order = i === this.length ? 1 : j === other.length ? -1 : compareOids(this.bytes, i * OID_BYTES, other.bytes, j * OID_BYTES);
      if (order < 0) take(this, i++, false);
      else if (order > 0) take(other, j++, false);
      else take(this, i++, other.flagged(j++));
    }
    return new SortedOids(bytes.subarray(0, k * OID_BYTES), flags, k);
  }

  /** Memory held, for caches that count it. */
  get byteSize(): number {
    return this.bytes.length + this.prefixes.byteLength + this.flags.length;
  }

  flagged(index: number): boolean {
    return (this.flags[index >> 3]! & (1 << (index & 7))) !== 0;
  }

  hexAt(index: number): string {
    return this.bytes.toString('hex', index * OID_BYTES, (index + 1) * OID_BYTES);
  }

  /** Whether the oid whose bytes start at `bytes[at]` is in the set. */
  hasAt(bytes: Uint8Array, at: number): boolean {
    const prefix = ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
    const prefixes = this.prefixes;
    // The first entry whose prefix is not below the oid's, then the few that share it.
    let low = 0;
    let high = this.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (prefixes[mid]! < prefix) low = mid + 1;
      else high = mid;
    }
    for (let i = low; i < this.length && prefixes[i] === prefix; i++) {
      if (compareOids(this.bytes, i * OID_BYTES, bytes, at) === 0) return true;
    }
    return false;
  }

  has(hex: string): boolean {
    return this.hasAt(Buffer.from(hex, 'hex'), 0);
  }

  /** The oids without the flag, in order. */
  *unflagged(): Generator<string> {
    for (let i = 0; i < this.length; i++) if (!this.flagged(i)) yield this.hexAt(i);
  }
}

/** The oid at `a[at]` against the one at `b[bt]`: negative when the first sorts first. */
function compareOids(a: Uint8Array, at: number, b: Uint8Array, bt: number): number {
  for (let k = 0; k < OID_BYTES; k++) {
    const d = a[at + k]! - b[bt + k]!;
    if (d !== 0) return d;
  }
  return 0;
}
