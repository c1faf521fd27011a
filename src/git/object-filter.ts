/**
 * Partial-clone filters (git's `--filter`, gitprotocol-v2 `filter`): which trees and blobs a walk
 * leaves out. Objects the client names in a `want` are always sent, filter or not, so a partial
 * clone can fetch what it is missing later.
 */
import { invalid } from '../errors.js';

export type ObjectFilter =
  | { kind: 'blob:none' }
  /** Blobs of at least `bytes` bytes are left out. */
  | { kind: 'blob:limit'; bytes: number }
  /** Trees and blobs at depth `depth` or deeper are left out (root trees are at depth 0). */
  | { kind: 'tree'; depth: number };

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

export function parseObjectFilter(spec: string): ObjectFilter {
  if (spec === 'blob:none') return { kind: 'blob:none' };
  const limit = /^blob:limit=(\d{1,15})([kmg]?)$/i.exec(spec);
  if (limit) return { kind: 'blob:limit', bytes: Number(limit[1]) * UNITS[limit[2]!.toLowerCase()]! };
  const tree = /^tree:(\d{1,9})$/.exec(spec);
  if (tree) return { kind: 'tree', depth: Number(tree[1]) };
  throw invalid(`filter '${spec}' is not supported (use blob:none, blob:limit=<n> or tree:<depth>)`);
}
