/**
 * Which files differ between two trees (e.g. a change's `files`: paths changed relative to its
 * first parent). Subtrees with equal oids are skipped without being read, so the cost follows
 * the size of the change, not of the repository; a directory read on both sides costs a walk
 * over its stored bytes and the decoding of the entries that differ.
 */
import type { ObjectStore } from './object-store.js';
import { EMPTY_TREE_OID, TREE_MODE, decodeTreeEntry, parseTree, readTreeBytes, treeEntryAt } from './git-object.js';
import type { StoredTreeEntry, TreeEntry, TreeValue } from './git-object.js';
import { joinPath } from './paths.js';
import { compareTreeOrder } from './tree-order.js';

export interface TreeChange {
  path: string;
  status: 'added' | 'deleted' | 'modified';
  /** null when added. */
  before: TreeValue | null;
  /** null when deleted. */
  after: TreeValue | null;
}

/** Two entries of one name, either absent, that differ. */
type Pair = [TreeEntry | null, TreeEntry | null];

/** The entry after `entry` in its tree; null at the end, 'disorder' when git's order is broken. */
function following(entry: StoredTreeEntry): StoredTreeEntry | null | 'disorder' {
  if (entry.next >= entry.buf.length) return null;
  const next = treeEntryAt(entry.buf, entry.next);
  return compareTreeOrder(entry, next) < 0 ? next : 'disorder';
}

const first = (buf: Buffer): StoredTreeEntry | null => (buf.length > 0 ? treeEntryAt(buf, 0) : null);

/** Same name, mode and oid: the same bytes. */
function sameStored(a: StoredTreeEntry, b: StoredTreeEntry): boolean {
  const length = a.next - a.pos;
  if (b.next - b.pos !== length) return false;
  for (let i = 0; i < length; i++) if (a.buf[a.pos + i] !== b.buf[b.pos + i]) return false;
  return true;
}

/**
 * The entries that differ between two trees, walked together in git's order and compared as
 * stored bytes, so only those are decoded; null when either tree is not in git's order.
 */
function pairInOrder(left: Buffer, right: Buffer): Pair[] | null {
  const pairs: Pair[] = [];
  let l = first(left);
  let r = first(right);
  while (l || r) {
    // The entry that sorts first is on one side only; the same name and kind pair up.
    const order = !l ? 1 : !r ? -1 : compareTreeOrder(l, r);
    if (order !== 0 || !sameStored(l!, r!)) pairs.push([order <= 0 ? decodeTreeEntry(l!) : null, order >= 0 ? decodeTreeEntry(r!) : null]);
    const nextL = order <= 0 ? following(l!) : l;
    const nextR = order >= 0 ? following(r!) : r;
    if (nextL === 'disorder' || nextR === 'disorder') return null;
    l = nextL;
    r = nextR;
  }
  return pairs;
}

/**
 * The same by name, from every entry decoded: for trees out of git's order, which a pull from an
 * upstream may bring (git does not refuse them by default). A duplicated name keeps its last entry.
 */
function pairByName(left: TreeEntry[], right: TreeEntry[]): Pair[] {
  const l = new Map(left.map((e) => [e.name, e]));
  const r = new Map(right.map((e) => [e.name, e]));
  return [...new Set([...l.keys(), ...r.keys()])].map((name): Pair => [l.get(name) ?? null, r.get(name) ?? null]);
}

/** Thrown inside a walk that has read more tree bytes than it was allowed (caught below). */
const OVER_BUDGET = new Error('the tree walk read more than it was allowed');

/**
 * Non-directory paths whose entry differs (content or mode), in path order. A file replaced by
 * a directory (or the reverse) is the file deleted and the directory's files added.
 */
export function diffTrees(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string): TreeChange[] {
  return diffTreesWithin(store, beforeTreeOid, afterTreeOid, Infinity)!;
}

/** The same, or null once the walk has read more than `maxTreeBytes` of trees (it stops there). */
export function diffTreesWithin(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string, maxTreeBytes: number): TreeChange[] | null {
  try {
    return walkTrees(store, beforeTreeOid, afterTreeOid, maxTreeBytes);
  } catch (err) {
    if (err === OVER_BUDGET) return null;
    throw err;
  }
}

function walkTrees(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string, maxTreeBytes: number): TreeChange[] {
  const changes: TreeChange[] = [];
  let budget = maxTreeBytes;
  const differ = ([l, r]: Pair, prefix: string): void => {
    if (l && r && l.mode === r.mode && l.oid === r.oid) return;
    const path = joinPath(prefix, (l ?? r)!.name);
    const lDir = l?.mode === TREE_MODE;
    const rDir = r?.mode === TREE_MODE;
    if (lDir || rDir) walk(lDir ? l.oid : null, rDir ? r.oid : null, path);
    const lFile = l && !lDir ? { mode: l.mode, oid: l.oid } : null;
    const rFile = r && !rDir ? { mode: r.mode, oid: r.oid } : null;
    if (lFile && rFile) changes.push({ path, status: 'modified', before: lFile, after: rFile });
    else if (lFile) changes.push({ path, status: 'deleted', before: lFile, after: null });
    else if (rFile) changes.push({ path, status: 'added', before: null, after: rFile });
  };
  const walk = (before: string | null, after: string | null, prefix: string): void => {
    if (before === after) return;
    const left = readTreeBytes(store, before ?? EMPTY_TREE_OID);
    const right = readTreeBytes(store, after ?? EMPTY_TREE_OID);
    budget -= left.length + right.length;
    if (budget < 0) throw OVER_BUDGET;
    const pairs = pairInOrder(left, right) ?? pairByName(parseTree(left), parseTree(right));
    for (const pair of pairs) differ(pair, prefix);
  };
  walk(beforeTreeOid, afterTreeOid, '');
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
