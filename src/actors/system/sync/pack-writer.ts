/**
 * Writing git packfiles (gitformat-pack, version 2, whole objects only): the 12-byte header with
 * the object count, each entry as its type-and-size header followed by the object's zlib stream,
 * and the SHA-1 of everything before it as the trailer. `PackWriter` emits the bytes as they are
 * produced, so a pack of any size streams through a bounded buffer; `writePack` builds a small
 * one in memory (a push to an upstream).
 */
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { GitObject, ObjectType } from '../../../vcs/object-store.js';

const CODE_BY_TYPE: Record<ObjectType, number> = { commit: 1, tree: 2, blob: 3, tag: 4 };

/**
 * Writes an entry's header at `target[at]` and returns where it ends: type in bits 4–6 of the
 * first byte, then the size, 4 + 7·n bits, little end first (at most 10 bytes for 2^64).
 */
function writePackEntryHeader(type: ObjectType, size: number, target: Uint8Array, at: number): number {
  let byte = (CODE_BY_TYPE[type] << 4) | (size & 0x0f);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    target[at++] = byte | 0x80;
    byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
  }
  target[at++] = byte;
  return at;
}

const ENTRY_HEADER_MAX = 10;

/** Pieces smaller than this are gathered before they are hashed and handed on. */
const GATHER_BYTES = 64 * 1024;

export class PackWriter {
  private readonly sha = createHash('sha1');
  // A pack is mostly small pieces (entry headers, small objects): hashing and handing them on one
  // by one would cost more than the bytes.
  private readonly gathered = Buffer.allocUnsafe(GATHER_BYTES);
  private used = 0;

  /** `sink` receives every byte of the pack in order, in buffers valid only during the call (copy what you keep). */
  constructor(private readonly sink: (bytes: Uint8Array) => void) {}

  private put(bytes: Uint8Array): void {
    if (bytes.length >= GATHER_BYTES / 4) {
      this.release();
      this.sha.update(bytes);
      this.sink(bytes);
      return;
    }
    if (this.used + bytes.length > GATHER_BYTES) this.release();
    this.gathered.set(bytes, this.used);
    this.used += bytes.length;
  }

  private release(): void {
    if (this.used === 0) return;
    const bytes = this.gathered.subarray(0, this.used);
    this.used = 0;
    this.sha.update(bytes);
    this.sink(bytes);
  }

  start(count: number): void {
    const header = Buffer.alloc(12);
    header.write('PACK', 0, 'latin1');
    header.writeUInt32BE(2, 4);
    header.writeUInt32BE(count, 8);
    this.put(header);
  }

  /** Starts an entry: the object's zlib stream follows through `data`. */
  entry(type: ObjectType, size: number): void {
    // Written in place: a pack has one header per object, most of them small.
    if (this.used + ENTRY_HEADER_MAX > GATHER_BYTES) this.release();
    this.used = writePackEntryHeader(type, size, this.gathered, this.used);
  }

  data(zlibBytes: Uint8Array): void {
    this.put(zlibBytes);
  }

  /** Writes the trailer (the pack's checksum). */
  finish(): void {
    this.release();
    this.sink(this.sha.digest());
  }
}

/** A version-2 packfile of whole (undeltified) objects. */
export function writePack(objects: readonly GitObject[]): Buffer {
  const parts: Uint8Array[] = [];
  const writer = new PackWriter((bytes) => parts.push(Buffer.from(bytes)));
  writer.start(objects.length);
  for (const object of objects) {
    writer.entry(object.type, object.content.length);
    writer.data(deflateSync(object.content));
  }
  writer.finish();
  return Buffer.concat(parts);
}
