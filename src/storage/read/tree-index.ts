/**
 * Parsed trees for the read path, kept per thread in an LRU keyed by repository and tree oid
 * (trees never change). Parsing dominates a content read otherwise: finding one file in a
 * directory of 200 entries parsed all 200 on every request. `lookupPath` and `walkTree` of
 * src/vcs do the same walks uncached; these are their cached counterparts for hot reads.
 */
import { TREE_MODE, decodeTreeEntry, parseTree, readTreeBytes, treeEntryAt, type StoredTreeEntry, type TreeEntry, type TreeValue } from '../../vcs/git-object.js';
import { compareTreeOrder, type EntryName } from '../../vcs/tree-order.js';
import type { ObjectStore } from '../../vcs/object-store.js';
import { joinPath, pathSegments } from '../../vcs/paths.js';
import type { WalkedEntry } from '../../vcs/tree-edit.js';
import { LruCache } from './lru-cache.js';

interface ParsedTree {
  entries: TreeEntry[];
  /** Built on the first lookup by name. */
  byName: Map<string, TreeEntry> | null;
}

/**
 * A tree too wide to parse for a lookup (a flat directory of 100,000 files took 80-95 ms a
 * request, parsed and mapped each time because too large to cache): its bytes and where each
 * entry starts, searched in git's order. About a quarter of its parsed form's memory.
 */
interface WideTree {
  bytes: Buffer;
  starts: Int32Array;
}

/** Above this many bytes (some 15,000 entries) a tree is looked up in its bytes, not parsed. */
const WIDE_TREE_BYTES = 512 * 1024;

const trees = new LruCache<ParsedTree>(20_000, 24 * 1024 * 1024, (tree) => 64 + tree.entries.length * 160);
const wideTrees = new LruCache<WideTree>(64, 64 * 1024 * 1024, (tree) => 64 + tree.bytes.length + tree.starts.byteLength);

function indexed(store: ObjectStore, scope: string, oid: string): ParsedTree | WideTree {
  const hit = trees.get(oid, scope) ?? wideTrees.get(oid, scope);
  if (hit) return hit;
  const bytes = readTreeBytes(store, oid);
  const wide = bytes.length > WIDE_TREE_BYTES ? indexWide(Buffer.from(bytes)) : null;
  if (wide) {
    wideTrees.set(oid, wide, scope);
    return wide;
  }
  const tree: ParsedTree = { entries: parseTree(bytes), byName: null };
  trees.set(oid, tree, scope);
  return tree;
}

/** Null for a tree out of git's order (a pull may bring one): it is parsed and looked up by name. */
function indexWide(bytes: Buffer): WideTree | null {
  const starts: number[] = [];
  let previous: StoredTreeEntry | null = null;
  for (let pos = 0; pos < bytes.length; ) {
    const entry = treeEntryAt(bytes, pos);
    if (previous && compareTreeOrder(previous, entry) >= 0) return null;
    starts.push(pos);
    previous = entry;
    pos = entry.next;
  }
  return { bytes, starts: Int32Array.from(starts) };
}

const isWide = (tree: ParsedTree | WideTree): tree is WideTree => 'starts' in tree;

/** The entry named `name` of a wide tree, by binary search in git's order (a file's place, then a directory's). */
function wideEntry(tree: WideTree, name: string): TreeEntry | undefined {
  const bytes = Buffer.from(name);
  for (const dir of [false, true]) {
    const wanted: EntryName = { buf: bytes, start: 0, end: bytes.length, dir };
    for (let lo = 0, hi = tree.starts.length - 1; lo <= hi; ) {
      const mid = (lo + hi) >>> 1;
      const entry = treeEntryAt(tree.bytes, tree.starts[mid]!);
      const order = compareTreeOrder(entry, wanted);
      if (order === 0) return decodeTreeEntry(entry);
      if (order < 0) lo = mid + 1;
      else hi = mid - 1;
    }
  }
  return undefined;
}

/** A tree's entries in git order, a wide one's decoded as they are reached (shared: do not modify). */
function* entriesOf(tree: ParsedTree | WideTree): Generator<TreeEntry> {
  if (!isWide(tree)) return yield* tree.entries;
  for (const start of tree.starts) yield decodeTreeEntry(treeEntryAt(tree.bytes, start));
}

/** How many entries a tree has, without parsing a wide one. */
export function treeEntryCount(store: ObjectStore, scope: string, oid: string): number {
  const tree = indexed(store, scope, oid);
  return isWide(tree) ? tree.starts.length : tree.entries.length;
}

/** What sits at `path` under `rootOid` (the root itself for `""`), or undefined. */
export function cachedLookup(store: ObjectStore, scope: string, rootOid: string, path: string): TreeValue | undefined {
  let current: TreeValue = { mode: TREE_MODE, oid: rootOid };
  for (const segment of pathSegments(path)) {
    if (current.mode !== TREE_MODE) return undefined;
    const tree = indexed(store, scope, current.oid);
    let entry: TreeEntry | undefined;
    if (isWide(tree)) entry = wideEntry(tree, segment);
    else {
      tree.byName ??= new Map(tree.entries.map((e) => [e.name, e]));
      entry = tree.byName.get(segment);
    }
    if (!entry) return undefined;
    current = { mode: entry.mode, oid: entry.oid };
  }
  return current;
}

/** Every entry under a tree, pre-order in git order, down to `maxDepth` levels. */
export function* cachedWalk(store: ObjectStore, scope: string, oid: string, maxDepth: number, prefix: string): Generator<WalkedEntry> {
  function* walk(treeOid: string, dir: string, depth: number): Generator<WalkedEntry> {
    for (const entry of entriesOf(indexed(store, scope, treeOid))) {
      const path = joinPath(dir, entry.name);
      yield { path, name: entry.name, mode: entry.mode, oid: entry.oid, depth };
      if (entry.mode === TREE_MODE && depth < maxDepth) yield* walk(entry.oid, path, depth + 1);
    }
  }
  yield* walk(oid, prefix, 1);
}
