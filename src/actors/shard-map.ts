/**
 * Location of actors: actor key → shard → worker slot. A shard is a fixed slice of the key space
 * (FNV-1a hash modulo SHARD_COUNT), much finer than the worker count so that shards can later be
 * placed on other nodes without rehashing keys. The slot table is the only place that knows
 * which thread owns a shard; handlers only ever name actors.
 */
export const SHARD_COUNT = 256;

export function shardOf(actor: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < actor.length; i++) {
    h ^= actor.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % SHARD_COUNT;
}

export function slotOf(shard: number, slots: number): number {
  return shard % slots;
}
