/**
 * Merging trees the way jj does: a merge of N trees (jj's `Merge<Tree>`, see merge.ts) is
 * resolved path by path. Paths whose terms cancel out are resolved; directories are merged
 * recursively; regular files that every term has are merged line by line (text-merge.ts).
 * Whatever is left is a conflict at that path.
 *
 * The result keeps one tree per term in which every resolved path holds the resolved value and
 * every conflicted path holds that term's own value — so the first tree is "the first side with
 * everything that merged cleanly", later merges can cancel terms tree by tree, and listing the
 * conflicts of a stored tree set is a walk over the few subtrees where the terms differ.
 */
import type { ObjectStore } from './object-store.js';
import { EMPTY_TREE_OID, TREE_MODE, readBlob, readTree, writeBlob, writeTree } from './git-object.js';
import type { TreeEntry, TreeValue } from './git-object.js';
import { flattenMerge, simplifyMerge, trivialMerge } from './merge.js';
import type { Merge } from './merge.js';
import { joinPath } from './paths.js';
import { TEXT_MERGE_MAX_BYTES, mergeText } from './text-merge.js';
import { writeTreeSet } from './conflict-layout.js';
import type { TreeSet } from './conflict-layout.js';

/** One conflicted path. For the usual three-way case `terms` is `[target, base, source]`. */
export interface PathConflict {
  path: string;
  base: TreeValue | null;
  target: TreeValue | null;
  source: TreeValue | null;
  /** Every term in merge order (sides at even indexes); more than 3 when > 2 sides conflict. */
  terms: Merge<TreeValue | null>;
}

export interface TreeMergeResult {
  /** One tree when clean; else one tree per term (see the module comment). */
  trees: TreeSet;
  /** The git root tree: the merged tree, or jj's conflict layout when conflicted. */
  treeOid: string;
  isConflicted: boolean;
  conflicts: PathConflict[];
}

export const valueKey = (value: TreeValue | null): string => (value ? `${value.mode} ${value.oid}` : '-');

const isRegularFile = (value: TreeValue): boolean => value.mode === '100644' || value.mode === '100755';

interface WalkContext {
  store: ObjectStore;
  /** Write the per-term trees (merge) or only report conflicts (listing). */
  write: boolean;
  /** Try line merges of files (merge) or treat every non-trivial path as conflicted (listing). */
  mergeFiles: boolean;
  conflicts: PathConflict[];
}

function toConflict(path: string, terms: Merge<TreeValue | null>): PathConflict {
  return { path, target: terms[0] ?? null, base: terms[1] ?? null, source: terms[terms.length - 1] ?? null, terms };
}

/** Merges files that every term has as a regular file; undefined when that is not clean. */
function mergeFileValues(store: ObjectStore, terms: Merge<TreeValue | null>): TreeValue | undefined {
  if (terms.some((t) => t === null || !isRegularFile(t))) return undefined;
  const values = terms as Merge<TreeValue>;
  const mode = trivialMerge(values, (v) => v.mode);
  if (!mode) return undefined;
  if (values.some((v) => (store.size(v.oid) ?? Infinity) > TEXT_MERGE_MAX_BYTES)) return undefined;
  // N sides merge pairwise: side0 + (side1 − base0), then + (side2 − base1), …
  let current = readBlob(store, values[0]!.oid);
  for (let i = 1; i < values.length; i += 2) {
    const result = mergeText(readBlob(store, values[i]!.oid), current, readBlob(store, values[i + 1]!.oid));
    if (result.kind !== 'clean') return undefined;
    current = result.content;
  }
  return { mode: mode.value.mode, oid: writeBlob(store, current) };
}

/** Walks one directory of every term; returns the per-term result trees (null = empty). */
function walkDir(ctx: WalkContext, terms: Merge<string | null>, prefix: string): Merge<string | null> {
  const maps = terms.map((oid) => {
    const map = new Map<string, TreeEntry>();
    if (oid !== null) for (const entry of readTree(ctx.store, oid)) map.set(entry.name, entry);
    return map;
  });
  const names = new Set<string>();
  for (const map of maps) for (const name of map.keys()) names.add(name);
  const out: TreeEntry[][] = terms.map(() => []);
  const modified = terms.map(() => false);
  const put = (i: number, name: string, value: TreeValue | null): void => {
    const before = maps[i]!.get(name);
    if (valueKey(before ?? null) !== valueKey(value)) modified[i] = true;
    if (value) out[i]!.push({ name, mode: value.mode, oid: value.oid });
  };
  for (const name of [...names].sort()) {
    const values = maps.map((map) => {
      const entry = map.get(name);
      return entry ? { mode: entry.mode, oid: entry.oid } : null;
    });
    const trivial = trivialMerge(values, valueKey);
    if (trivial) {
      values.forEach((_, i) => put(i, name, trivial.value));
      continue;
    }
    const path = joinPath(prefix, name);
    if (values.every((v) => v === null || v.mode === TREE_MODE)) {
      const sub = walkDir(ctx, values.map((v) => v?.oid ?? null), path);
      sub.forEach((oid, i) => put(i, name, oid === null ? null : { mode: TREE_MODE, oid }));
      continue;
    }
    const simplified = simplifyMerge(values, valueKey);
    const merged = ctx.mergeFiles ? mergeFileValues(ctx.store, simplified) : undefined;
    if (merged) {
      values.forEach((_, i) => put(i, name, merged));
      continue;
    }
    ctx.conflicts.push(toConflict(path, simplified));
    values.forEach((value, i) => put(i, name, value));
  }
  if (!ctx.write) return terms;
  return terms.map((oid, i) => {
    if (!modified[i]) return oid;
    return out[i]!.length === 0 ? null : writeTree(ctx.store, out[i]!);
  });
}

const byPath = (a: PathConflict, b: PathConflict): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/** Resolves a tree set as far as possible (see the module comment). */
export function mergeTreeSet(store: ObjectStore, trees: TreeSet): TreeMergeResult {
  const simplified = simplifyMerge(trees, (oid) => oid);
  const trivial = trivialMerge(simplified, (oid) => oid);
  if (trivial) return { trees: [trivial.value], treeOid: writeTreeSet(store, [trivial.value]), isConflicted: false, conflicts: [] };
  const ctx: WalkContext = { store, write: true, mergeFiles: true, conflicts: [] };
  const written = walkDir(ctx, simplified, '').map((oid) => oid ?? EMPTY_TREE_OID);
  const result = simplifyMerge(written, (oid) => oid);
  const clean = trivialMerge(result, (oid) => oid);
  const final = clean ? [clean.value] : result;
  return {
    trees: final,
    treeOid: writeTreeSet(store, final),
    isConflicted: final.length > 1,
    conflicts: final.length > 1 ? ctx.conflicts.sort(byPath) : [],
  };
}

/** The usual three-way merge of single trees. */
export function mergeTrees(store: ObjectStore, base: string, target: string, source: string): TreeMergeResult {
  return mergeTreeSet(store, [target, base, source]);
}

/**
 * Three-way merge of tree sets (any of them may be conflicted): target + (source − base), the
 * operation behind rebases and merge commits. Target's terms come first, so the first side of
 * a conflicted result is the target's.
 */
export function mergeTreeSets(store: ObjectStore, base: TreeSet, target: TreeSet, source: TreeSet): TreeMergeResult {
  return mergeTreeSet(store, flattenMerge([target, base, source]));
}

/** The conflicted paths of a tree set (empty when it is a single tree), in path order. */
export function listTreeSetConflicts(store: ObjectStore, trees: TreeSet): PathConflict[] {
  if (trees.length === 1) return [];
  const ctx: WalkContext = { store, write: false, mergeFiles: false, conflicts: [] };
  walkDir(ctx, trees, '');
  return ctx.conflicts.sort(byPath);
}
