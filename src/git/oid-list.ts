/**
 * A list of object ids kept as their 20 bytes side by side in one growing buffer: a pack's
 * objects in order. A clone lists every object of the history (hundreds of thousands for a modest
 * one); as strings each would cost a heap object of 40 characters and more.
 */
const OID_BYTES = 20;

export class OidList {
  private bytes: Buffer;
  private count = 0;

  constructor(capacity = 1024) {
    this.bytes = Buffer.allocUnsafe(Math.max(1, capacity) * OID_BYTES);
  }

  get length(): number {
    return this.count;
  }

  /** Memory held, for caches that count it. */
  get byteSize(): number {
    return this.bytes.length;
  }

  /** Appends the oid whose bytes start at `bytes[at]`. */
  pushAt(bytes: Uint8Array, at: number): void {
    this.room();
    this.bytes.set(bytes.subarray(at, at + OID_BYTES), this.count * OID_BYTES);
    this.count++;
  }

  push(hex: string): void {
    this.room();
    this.bytes.write(hex, this.count * OID_BYTES, OID_BYTES, 'hex');
    this.count++;
  }

  /** The oids' bytes, side by side (a view: valid until the next push). */
  get raw(): Buffer {
    return this.bytes.subarray(0, this.count * OID_BYTES);
  }

  *[Symbol.iterator](): Generator<string> {
    for (let i = 0; i < this.count; i++) yield this.hexAt(i);
  }

  hexAt(index: number): string {
    return this.bytes.toString('hex', index * OID_BYTES, (index + 1) * OID_BYTES);
  }

  /** A copy holding exactly these oids, then `more`'s. */
  concat(more: OidList): OidList {
    const out = new OidList(this.count + more.count);
    this.bytes.copy(out.bytes, 0, 0, this.count * OID_BYTES);
    more.bytes.copy(out.bytes, this.count * OID_BYTES, 0, more.count * OID_BYTES);
    out.count = this.count + more.count;
    return out;
  }

  private room(): void {
    if ((this.count + 1) * OID_BYTES <= this.bytes.length) return;
    const grown = Buffer.allocUnsafe(this.bytes.length * 2);
    this.bytes.copy(grown, 0, 0, this.count * OID_BYTES);
    this.bytes = grown;
  }
}
