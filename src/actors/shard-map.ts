/**
 * Location of actors: actor key → shard → worker slot. A shard is a fixed slice of the key space
 * (FNV-1a hash modulo SHARD_COUNT), much finer than the worker count so that shards can later be
 * placed on other nodes without rehashing keys. The slot table is the only place that knows
 * which thread owns a shard; handlers only ever name actors.
 */
export const SHARD_COUNT = 256;

const FNV_OFFSET = 0x811c9dc5;

function fnv1a(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h;
}

export function shardOf(actor: string): number {
  return (fnv1a(FNV_OFFSET, actor) >>> 0) % SHARD_COUNT;
}

/**
 * `shardOf(prefix + id)` for every id, without building that string: the requests' hot path
 * names a repository's shard several times, and each concatenation had to be flattened again
 * to be hashed.
 */
export function shardOfPrefixed(prefix: string): (id: string) => number {
  const start = fnv1a(FNV_OFFSET, prefix);
  return (id) => (fnv1a(start, id) >>> 0) % SHARD_COUNT;
}

export function slotOf(shard: number, slots: number): number {
  return shard % slots;
}
