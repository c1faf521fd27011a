import { invalid } from '../errors.js';

/**
 * Opaque page cursors (API §1): base64url JSON of the position after the last item returned.
 * Positions are keys, not offsets, so inserts elsewhere never skip or repeat an item.
 */
export function encodeCursor(position: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

export function decodeCursor<T extends Record<string, unknown>>(raw: string | number | undefined, check: (value: Record<string, unknown>) => value is T): T | null {
  if (raw === undefined || raw === '') return null;
  try {
    const value = JSON.parse(Buffer.from(String(raw), 'base64url').toString('utf8')) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value) && check(value as Record<string, unknown>)) return value as T;
  } catch {
    // fall through
  }
  throw invalid('malformed cursor');
}

export const hasString =
  <K extends string>(...keys: K[]) =>
  (v: Record<string, unknown>): v is Record<K, string> =>
    keys.every((k) => typeof v[k] === 'string');
