import { invalid } from '../errors.js';

/**
 * Opaque page cursors (API §1): base64url JSON of the position after the last item returned.
 * Positions are keys, not offsets, so inserts elsewhere never skip or repeat an item.
 */
export function encodeCursor(position: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

/**
 * Positions are names and ids, none longer than this in UTF-8: a longer one was not made here,
 * and as the start of a key range it would not fit LMDB's keys (1,978 bytes).
 */
const MAX_POSITION_BYTES = 1024;
const fits = (v: unknown): boolean => (typeof v === 'string' ? Buffer.byteLength(v) <= MAX_POSITION_BYTES : !Array.isArray(v) || v.every(fits));

export function decodeCursor<T extends Record<string, unknown>>(raw: string | number | undefined, check: (value: Record<string, unknown>) => value is T): T | null {
  if (raw === undefined || raw === '') return null;
  try {
    const value = JSON.parse(Buffer.from(String(raw), 'base64url').toString('utf8')) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every(fits) && check(value as Record<string, unknown>)) return value as T;
  } catch {
    // fall through
  }
  throw invalid('malformed cursor');
}

export const hasString =
  <K extends string>(...keys: K[]) =>
  (v: Record<string, unknown>): v is Record<K, string> =>
    keys.every((k) => typeof v[k] === 'string');

export interface CursorPage<V> {
  items: V[];
  next_cursor: string | null;
  has_more: boolean;
}

/**
 * One page of records listed newest first by id: the first `limit` that `keep` accepts, and a
 * cursor after the last of them when more follow.
 */
export function cursorPage<T extends { id: string }, V>(records: Iterable<T>, limit: number, view: (record: T) => V, keep: (record: T) => boolean = () => true): CursorPage<V> {
  const items: V[] = [];
  let last: string | null = null;
  let hasMore = false;
  for (const record of records) {
    if (!keep(record)) continue;
    if (items.length === limit) {
      hasMore = true;
      break;
    }
    items.push(view(record));
    last = record.id;
  }
  return { items, next_cursor: hasMore && last ? encodeCursor({ before: last }) : null, has_more: hasMore };
}
