import type { Database, Key } from 'lmdb';
import { keyInRange, lastPart, type KeyRange } from './keys.js';
import { mergeOrdered } from './merge-ordered.js';

/** An entry of a list whose keys end in a time-ordered id: the id and the stored value. */
export interface ListEntry {
  id: string;
  value: unknown;
}

/**
 * The records of `range` whose last key part is a time-ordered id, newest first, starting
 * strictly before the id `before` when given: the shape of every cursor-paged list.
 */
export function* newestFirst(meta: Database<unknown, Key>, range: KeyRange, before?: string): Generator<ListEntry> {
  for (const { key, value } of meta.getRange({ start: before === undefined ? range.end : keyInRange(range, before), end: range.start, reverse: true })) {
    const id = lastPart(key);
    if (id !== before) yield { id, value };
  }
}

/** Lists of that shape (one per shard, say) read as one: newest first across all, strictly before `before`. */
export function newestFirstAcross(meta: Database<unknown, Key>, ranges: readonly KeyRange[], before?: string): Generator<ListEntry> {
  return mergeOrdered(
    ranges.map((range) => newestFirst(meta, range, before)),
    (entry) => entry.id,
    true,
  );
}
