/**
 * Applying a git delta (gitformat-pack "Deltified representation") as its instructions arrive:
 * the base size and the result size (varints), then copy instructions (a range of the base) and
 * insert instructions (up to 127 literal bytes). The instructions are consumed in pieces as they
 * inflate, and the result leaves in pieces, so neither the delta nor its result has to be whole in
 * memory; only the base is read at random, through `BaseBytes` (in memory or read back from
 * storage).
 */
import { PackError } from './pack-error.js';

export interface BaseBytes {
  readonly size: number;
  /** `length` bytes of the base from `offset` (the range is within `size`). */
  read(offset: number, length: number): Uint8Array;
}

export interface DeltaTarget {
  write(bytes: Uint8Array): void | Promise<void>;
}

/** A copy is read from the base at most this much at a time. */
const COPY_PIECE = 1024 * 1024;
/** Varints longer than this would pass 2^49, far beyond any object we accept. */
const MAX_VARINT_BYTES = 7;

const bad = (what: string): PackError => new PackError(`a delta is corrupt (${what})`);

export class DeltaApplier {
  /** Bytes of an instruction (or a size varint) split across pieces. */
  private pending: Buffer = Buffer.alloc(0);
  private sizes: number[] = [];
  private target: DeltaTarget | null = null;
  private targetSize = 0;
  private written = 0;
  /** Literal bytes still to come of an insert instruction split across pieces. */
  private inserting = 0;

  /** `open` learns the result's size before any byte of it and returns where the bytes go. */
  constructor(
    private readonly base: BaseBytes,
    private readonly open: (targetSize: number) => DeltaTarget,
  ) {}

  async push(piece: Uint8Array): Promise<void> {
    let bytes = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    if (this.pending.length > 0) {
      bytes = Buffer.concat([this.pending, bytes]);
      this.pending = Buffer.alloc(0);
    }
    let pos = 0;
    while (pos < bytes.length) {
      if (this.inserting > 0) {
        const n = Math.min(this.inserting, bytes.length - pos);
        await this.emit(bytes.subarray(pos, pos + n));
        this.inserting -= n;
        pos += n;
        continue;
      }
      if (this.target === null) {
        const end = varintEnd(bytes, pos);
        if (end < 0) break;
        this.sizes.push(readVarint(bytes, pos));
        pos = end;
        if (this.sizes.length === 2) this.start();
        continue;
      }
      const op = bytes[pos]!;
      if (op & 0x80) {
        let length = 1;
        for (let bit = 0x01; bit <= 0x40; bit <<= 1) if (op & bit) length++;
        if (pos + length > bytes.length) break;
        let offset = 0;
        let size = 0;
        let at = pos + 1;
        for (let i = 0; i < 4; i++) if (op & (1 << i)) offset += bytes[at++]! * 2 ** (8 * i);
        for (let i = 0; i < 3; i++) if (op & (0x10 << i)) size += bytes[at++]! * 2 ** (8 * i);
        if (size === 0) size = 0x10000;
        pos = at;
        if (offset + size > this.base.size) throw bad('copy out of the base');
        for (let from = offset; from < offset + size; from += COPY_PIECE) {
          await this.emit(this.base.read(from, Math.min(COPY_PIECE, offset + size - from)));
        }
      } else if (op !== 0) {
        this.inserting = op;
        pos++;
      } else throw bad('reserved instruction');
    }
    if (pos < bytes.length) this.pending = Buffer.from(bytes.subarray(pos));
  }

  /** Checks that the delta ended on an instruction boundary with the whole result written. */
  finish(): void {
    if (this.target === null || this.pending.length > 0 || this.inserting > 0) throw bad('truncated');
    if (this.written !== this.targetSize) throw bad('result shorter than declared');
  }

  private start(): void {
    const [sourceSize, targetSize] = this.sizes as [number, number];
    if (sourceSize !== this.base.size) throw bad('base size mismatch');
    this.targetSize = targetSize;
    this.target = this.open(targetSize);
  }

  private async emit(bytes: Uint8Array): Promise<void> {
    if (this.written + bytes.length > this.targetSize) throw bad('result longer than declared');
    this.written += bytes.length;
    await this.target!.write(bytes);
  }
}

/** The end of the varint at `pos`, or -1 when it continues past the buffer. */
function varintEnd(bytes: Buffer, pos: number): number {
  for (let i = pos; i < bytes.length; i++) {
    if (i - pos >= MAX_VARINT_BYTES) throw bad('size too large');
    if (!(bytes[i]! & 0x80)) return i + 1;
  }
  return -1;
}

function readVarint(bytes: Buffer, pos: number): number {
  let value = 0;
  for (let shift = 0; ; shift += 7) {
    const byte = bytes[pos++]!;
    value += (byte & 0x7f) * 2 ** shift;
    if (!(byte & 0x80)) return value;
  }
}
