/**
 * Parsed trees for the read path, kept per thread in an LRU keyed by repository and tree oid
 * (trees never change). Parsing dominates a content read otherwise: finding one file in a
 * directory of 200 entries parsed all 200 on every request. `lookupPath` and `walkTree` of
 * src/vcs do the same walks uncached; these are their cached counterparts for hot reads.
 */
import { TREE_MODE, readTree, type TreeEntry, type TreeValue } from '../../vcs/git-object.js';
import type { ObjectStore } from '../../vcs/object-store.js';
import { joinPath, pathSegments } from '../../vcs/paths.js';
import type { WalkedEntry } from '../../vcs/tree-edit.js';
import { LruCache } from './lru-cache.js';

interface ParsedTree {
  entries: TreeEntry[];
  /** Built on the first lookup by name. */
  byName: Map<string, TreeEntry> | null;
}

const trees = new LruCache<ParsedTree>(20_000, 24 * 1024 * 1024, (tree) => 64 + tree.entries.length * 160);

function parsed(store: ObjectStore, scope: string, oid: string): ParsedTree {
  let tree = trees.get(oid, scope);
  if (!tree) trees.set(oid, (tree = { entries: readTree(store, oid), byName: null }), scope);
  return tree;
}

/** The entries of a tree, in git order (shared: do not modify). */
export function cachedTree(store: ObjectStore, scope: string, oid: string): readonly TreeEntry[] {
  return parsed(store, scope, oid).entries;
}

/** What sits at `path` under `rootOid` (the root itself for `""`), or undefined. */
export function cachedLookup(store: ObjectStore, scope: string, rootOid: string, path: string): TreeValue | undefined {
  let current: TreeValue = { mode: TREE_MODE, oid: rootOid };
  for (const segment of pathSegments(path)) {
    if (current.mode !== TREE_MODE) return undefined;
    const tree = parsed(store, scope, current.oid);
    tree.byName ??= new Map(tree.entries.map((e) => [e.name, e]));
    const entry = tree.byName.get(segment);
    if (!entry) return undefined;
    current = { mode: entry.mode, oid: entry.oid };
  }
  return current;
}

/** Every entry under a tree, pre-order in git order, down to `maxDepth` levels. */
export function* cachedWalk(store: ObjectStore, scope: string, oid: string, maxDepth: number, prefix: string): Generator<WalkedEntry> {
  function* walk(treeOid: string, dir: string, depth: number): Generator<WalkedEntry> {
    for (const entry of parsed(store, scope, treeOid).entries) {
      const path = joinPath(dir, entry.name);
      yield { path, name: entry.name, mode: entry.mode, oid: entry.oid, depth };
      if (entry.mode === TREE_MODE && depth < maxDepth) yield* walk(entry.oid, path, depth + 1);
    }
  }
  yield* walk(oid, prefix, 1);
}
