/**
 * zlib streams (RFC 1950) around deflate data we already have: a pack entry must be a complete
 * zlib stream — a 2-byte header, the deflate data, the Adler-32 of the uncompressed bytes — and a
 * blob stored as raw deflate only lacks the frame, so it is sent without compressing it again.
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

/** Default compression, 32 KiB window (what raw deflate uses by default): the first two bytes of the stream. */
export const ZLIB_HEADER = Buffer.from([0x78, 0x9c]);

/** The last four bytes of a zlib stream: the Adler-32 of the uncompressed bytes, big-endian. */
export function zlibTrailer(checksum: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(checksum, 0);
  return out;
}
