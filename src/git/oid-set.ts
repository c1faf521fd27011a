/**
 * A set of object ids kept as their 20 bytes, in an open-addressing table. A clone's walk meets
 * every entry of every tree (hundreds of thousands for a modest history), nearly all of them
 * objects it has already seen; this lets it test an entry straight from the tree's bytes, where a
 * `Set<string>` would first need a hex string made for each one.
 */
const OID_BYTES = 20;

export class OidSet {
  private keys: Uint8Array;
  private filled: Uint8Array;
  private mask: number;
  private count = 0;

  constructor(capacity = 1024) {
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.keys = new Uint8Array(size * OID_BYTES);
    this.filled = new Uint8Array(size);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Whether the oid whose bytes start at `bytes[at]` is in the set. */
  hasAt(bytes: Uint8Array, at: number): boolean {
    return this.slot(bytes, at) >= 0;
  }

  /** Adds the oid at `bytes[at]`; false when it was there already. */
  addAt(bytes: Uint8Array, at: number): boolean {
    const found = this.slot(bytes, at);
    if (found >= 0) return false;
    const free = -found - 1;
    this.keys.set(bytes.subarray(at, at + OID_BYTES), free * OID_BYTES);
    this.filled[free] = 1;
    // Kept at most half full, so probes stay short.
    if (++this.count * 2 > this.filled.length) this.grow();
    return true;
  }

  has(hex: string): boolean {
    return this.hasAt(Buffer.from(hex, 'hex'), 0);
  }

  add(hex: string): boolean {
    return this.addAt(Buffer.from(hex, 'hex'), 0);
  }

  /** The slot holding the oid, or `-(free slot) - 1` where it would go. SHA-1 bytes are uniform: the first four are the hash. */
  private slot(bytes: Uint8Array, at: number): number {
    let i = (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) & this.mask;
    const keys = this.keys;
    for (;;) {
      if (!this.filled[i]) return -i - 1;
      const base = i * OID_BYTES;
      let same = true;
      for (let k = 0; k < OID_BYTES; k++) {
        if (keys[base + k] !== bytes[at + k]) {
          same = false;
          break;
        }
      }
      if (same) return i;
      i = (i + 1) & this.mask;
    }
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldFilled = this.filled;
    const size = oldFilled.length * 2;
    this.keys = new Uint8Array(size * OID_BYTES);
    this.filled = new Uint8Array(size);
    this.mask = size - 1;
    for (let i = 0; i < oldFilled.length; i++) {
      if (!oldFilled[i]) continue;
      const free = -this.slot(oldKeys, i * OID_BYTES) - 1;
      this.keys.set(oldKeys.subarray(i * OID_BYTES, (i + 1) * OID_BYTES), free * OID_BYTES);
      this.filled[free] = 1;
    }
  }
}
