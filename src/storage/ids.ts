import { pooledRandomBytes } from '../random-pool.js';

/**
 * Opaque ids (API §1): a prefix and a ULID, so ids sort by creation time. Monotonic within a
 * thread: two ids made in the same millisecond still sort in the order they were made, which keeps
 * per-repository event and operation order when a batch writes many records at once.
 */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

let lastTime = -1;
const lastRandom = new Uint8Array(16);

function encodeTime(time: number): string {
  let out = '';
  for (let i = 9; i >= 0; i--) {
    const mod = time % 32;
    out = ALPHABET[mod] + out;
    time = (time - mod) / 32;
  }
  return out;
}

function nextRandom(time: number): string {
  if (time === lastTime) {
    // Increment the previous random part (base-32 digits) so ids stay strictly increasing.
    for (let i = 15; i >= 0; i--) {
      if (lastRandom[i]! < 31) { lastRandom[i]!++; break; }
      lastRandom[i] = 0;
    }
  } else {
    lastTime = time;
    const bytes = pooledRandomBytes(16);
    for (let i = 0; i < 16; i++) lastRandom[i] = bytes[i]! & 31;
    lastRandom[0] = lastRandom[0]! & 15; // leave room to increment without overflow
  }
  let out = '';
  for (let i = 0; i < 16; i++) out += ALPHABET[lastRandom[i]!];
  return out;
}

export function ulid(now = Date.now()): string {
  const time = Math.max(now, lastTime);
  return encodeTime(time) + nextRandom(time);
}

export type IdPrefix = 'org' | 'key' | 'repo' | 'evt' | 'op' | 'sync' | 'wht' | 'dlv' | 'upl' | 'push' | 'saga';

export function newId(prefix: IdPrefix, now?: number): string {
  return `${prefix}_${ulid(now)}`;
}

/** Milliseconds since the epoch encoded in an id made by `newId`. */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let t = 0;
  for (const ch of body) t = t * 32 + ALPHABET.indexOf(ch);
  return t;
}
