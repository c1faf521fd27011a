import type { Database, Key } from 'lmdb';
import { lastPart, type KeyRange } from './keys.js';

/**
 * The records of `range` whose last key part is a time-ordered id, newest first, starting
 * strictly before the key `before` when given: the shape of every cursor-paged list.
 */
export function* newestFirst(meta: Database<unknown, Key>, range: KeyRange, before?: Key): Generator<{ id: string; value: unknown }> {
  const beforeId = before === undefined ? undefined : lastPart(before);
  for (const { key, value } of meta.getRange({ start: before ?? range.end, end: range.start, reverse: true })) {
    const id = lastPart(key);
    if (id !== beforeId) yield { id, value };
  }
}
