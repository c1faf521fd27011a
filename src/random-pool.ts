import { randomFillSync } from 'node:crypto';

/**
 * Random bytes from a pooled buffer: one `randomFillSync` per 4 KiB instead of a `randomBytes`
 * call per id, which measured ~35 µs each in a worker thread — a visible share of a small write.
 * The returned bytes are a copy, safe to keep.
 */
const pool = Buffer.alloc(4096);
let position = pool.length;

export function pooledRandomBytes(size: number): Buffer {
  if (position + size > pool.length) {
    randomFillSync(pool);
    position = 0;
  }
  const out = Buffer.from(pool.subarray(position, position + size));
  position += size;
  return out;
}
