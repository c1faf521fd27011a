/**
 * zlib streams (RFC 1950) built without running zlib: a pack entry must be a complete zlib stream
 * — a 2-byte header, deflate data, the Adler-32 of the uncompressed bytes. A blob stored as raw
 * deflate only lacks the frame; an object not worth compressing is framed as deflate's "stored"
 * blocks, which costs a checksum and a copy instead of a zlib call (whose set-up alone outweighs
 * the work for a few hundred bytes).
 */

/** Adler-32 of `bytes`, continuing from `start` (1 for a new stream). */
export function adler32(bytes: Uint8Array, start = 1): number {
  let a = start & 0xffff;
  let b = start >>> 16;
  let i = 0;
  while (i < bytes.length) {
    // 5552 is the most bytes that can be summed before b may exceed 2^32 (zlib's NMAX).
    const end = Math.min(i + 5552, bytes.length);
    for (; i < end; i++) {
      a += bytes[i]!;
      b += a;
    }
    a %= 65521;
    b %= 65521;
  }
  return ((b << 16) | a) >>> 0;
}

/** Deflate, 32 KiB window, default level: the header zlib writes (any valid one inflates the same). */
export const ZLIB_HEADER = Buffer.from([0x78, 0x9c]);
/** The same, marked as the fastest level: the header of a stream of stored blocks. */
const ZLIB_STORED_HEADER = Buffer.from([0x78, 0x01]);
const STORED_BLOCK_MAX = 65535;

/** The last four bytes of a zlib stream: the Adler-32 of the uncompressed bytes, big-endian. */
export function zlibTrailer(checksum: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(checksum, 0);
  return out;
}

/** Reused by every call: a pack has a stored stream for most of its objects. */
const blockHeader = Buffer.allocUnsafe(5);
const trailer = Buffer.allocUnsafe(4);

/**
 * `content` as a zlib stream of stored (uncompressed) blocks, handed to `emit` piece by piece;
 * each piece is valid only during its call (`emit` copies what it keeps).
 */
export function emitZlibStored(content: Uint8Array, emit: (bytes: Uint8Array) => void): void {
  emit(ZLIB_STORED_HEADER);
  let at = 0;
  do {
    const length = Math.min(STORED_BLOCK_MAX, content.length - at);
    blockHeader[0] = at + length === content.length ? 1 : 0;
    blockHeader.writeUInt16LE(length, 1);
    blockHeader.writeUInt16LE(~length & 0xffff, 3);
    emit(blockHeader);
    emit(length === content.length ? content : content.subarray(at, at + length));
    at += length;
  } while (at < content.length);
  trailer.writeUInt32BE(adler32(content), 0);
  emit(trailer);
}
