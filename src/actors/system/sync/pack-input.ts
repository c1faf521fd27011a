/**
 * The bytes of a packfile as they arrive: a window over an asynchronous byte stream that the
 * pack reader consumes from, with a cap on the total and the SHA-1 of every consumed byte (what
 * the pack's trailer must equal). Only the chunk being read is held. zlib is handed whole chunks
 * and may stop inside one (an object's compressed data ends there): the bytes it did not use are
 * given back with `unread`, which is why hashing happens when a chunk is left, not when it is read.
 */
import { createHash } from 'node:crypto';
import { PackError } from './pack-error.js';

const EMPTY = Buffer.alloc(0);

export class PackInput {
  private readonly iterator: AsyncIterator<Uint8Array>;
  private chunk: Buffer = EMPTY;
  private pos = 0;
  /** Start of the current chunk's bytes not yet hashed. */
  private hashFrom = 0;
  private hashing = true;
  private received = 0;
  private ended = false;
  private readonly hash = createHash('sha1');

  constructor(
    source: AsyncIterable<Uint8Array>,
    private readonly maxBytes: number,
  ) {
    this.iterator = source[Symbol.asyncIterator]();
  }

  /** Offset in the pack of the next unread byte. */
  get offset(): number {
    return this.received - (this.chunk.length - this.pos);
  }

  /** The next non-empty chunk of the stream, counted against the cap; null at its end. */
  private async next(): Promise<Buffer | null> {
    while (!this.ended) {
      const next = await this.iterator.next();
      if (next.done) {
        this.ended = true;
        break;
      }
      if (next.value.length === 0) continue;
      this.received += next.value.length;
      if (this.received > this.maxBytes) throw new PackError(`the pack is larger than the limit of ${this.maxBytes} bytes`);
      return Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
    }
    return null;
  }

  private async refill(): Promise<boolean> {
    if (this.hashing) this.hash.update(this.chunk.subarray(this.hashFrom));
    this.chunk = (await this.next()) ?? EMPTY;
    this.pos = 0;
    this.hashFrom = 0;
    return this.chunk.length > 0;
  }

  /**
   * Makes the unread bytes at least `bytes` long (fewer at the end of the stream) by appending the
   * stream's next chunks, in one copy; false when nothing could be added.
   */
  async extend(bytes: number): Promise<boolean> {
    const parts = [this.chunk.subarray(this.pos)];
    let length = parts[0]!.length;
    while (length < bytes) {
      const next = await this.next();
      if (!next) break;
      parts.push(next);
      length += next.length;
    }
    if (parts.length === 1) return false;
    if (this.hashing) this.hash.update(this.chunk.subarray(this.hashFrom, this.pos));
    this.chunk = Buffer.concat(parts, length);
    this.pos = 0;
    this.hashFrom = 0;
    return true;
  }

  async byte(): Promise<number> {
    if (this.pos === this.chunk.length && !(await this.refill())) throw new PackError('the pack is truncated');
    return this.chunk[this.pos++]!;
  }

  async bytes(n: number): Promise<Buffer> {
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      if (this.pos === this.chunk.length && !(await this.refill())) throw new PackError('the pack is truncated');
      const take = Math.min(n - filled, this.chunk.length - this.pos);
      this.chunk.copy(out, filled, this.pos, this.pos + take);
      this.pos += take;
      filled += take;
    }
    return out;
  }

  /** The bytes buffered now, without consuming them (read more when none are); empty at the end. */
  async available(): Promise<Buffer> {
    if (this.pos === this.chunk.length) await this.refill();
    return this.chunk.subarray(this.pos);
  }

  /** Consumes `n` bytes of what `available` returned. */
  skip(n: number): void {
    this.pos += n;
  }

  /** Consumes and returns everything buffered (reading more when nothing is); empty at the end. */
  async take(): Promise<Buffer> {
    const bytes = await this.available();
    this.pos = this.chunk.length;
    return bytes;
  }

  /** Gives back the last `n` bytes `take` returned. */
  unread(n: number): void {
    if (n > this.pos) throw new Error('unread beyond the current chunk');
    this.pos -= n;
  }

  /** Stops hashing and returns the SHA-1 of everything consumed so far. */
  digest(): Buffer {
    this.hash.update(this.chunk.subarray(this.hashFrom, this.pos));
    this.hashFrom = this.pos;
    this.hashing = false;
    return this.hash.digest();
  }

  /** Whether the stream has no byte left. */
  async atEnd(): Promise<boolean> {
    return this.pos === this.chunk.length && !(await this.refill());
  }

  /** Lets go of the source (the rest of a response is not read). */
  async close(): Promise<void> {
    await this.iterator.return?.();
  }
}
