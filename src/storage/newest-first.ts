import type { Database, Key } from 'lmdb';
import { under } from './keys.js';

/**
 * The records under `prefix` whose next key part is a time-ordered id, newest first, starting
 * strictly before `before` when given: the shape of every cursor-paged list.
 */
export function* newestFirst(meta: Database<unknown, Key>, prefix: readonly string[], before?: string): Generator<{ id: string; value: unknown }> {
  const range = under(prefix);
  const start: Key = before ? [...prefix, before] : range.end;
  for (const { key, value } of meta.getRange({ start, end: range.start, reverse: true })) {
    const id = (key as string[])[prefix.length]!;
    if (id !== before) yield { id, value };
  }
}
