/**
 * Which files differ between two trees (e.g. a change's `files`: paths changed relative to its
 * first parent). Subtrees with equal oids are skipped without being read, so the cost follows
 * the size of the change, not of the repository; within a directory read on both sides, the two
 * trees' entries are walked together in git's order and compared as stored bytes, so only the
 * entries that differ are decoded.
 */
import { VcsError } from './errors.js';
import type { ObjectStore } from './object-store.js';
import { TREE_MODE, decodeTreeEntry, readTreeBytes, treeEntryAt } from './git-object.js';
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

const NONE = Buffer.alloc(0);

/** The entry after `entry` in its tree, or null at the end; throws when git's order is broken. */
function following(entry: StoredTreeEntry): StoredTreeEntry | null {
  if (entry.next >= entry.buf.length) return null;
  const next = treeEntryAt(entry.buf, entry.next);
  if (compareTreeOrder(entry, next) >= 0) throw new VcsError('corrupt', 'tree entries out of order');
  return next;
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
 * Non-directory paths whose entry differs (content or mode), in path order. A file replaced by
 * a directory (or the reverse) is the file deleted and the directory's files added.
 */
export function diffTrees(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string): TreeChange[] {
  const changes: TreeChange[] = [];
  const differ = (l: TreeEntry | null, r: TreeEntry | null, prefix: string): void => {
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
    let l = first(before ? readTreeBytes(store, before) : NONE);
    let r = first(after ? readTreeBytes(store, after) : NONE);
    while (l || r) {
      // An entry only on one side sorts first; one on both (same name, same kind) pairs up.
      const order = !l ? 1 : !r ? -1 : compareTreeOrder(l, r);
      if (order !== 0 || !sameStored(l!, r!)) differ(order <= 0 ? decodeTreeEntry(l!) : null, order >= 0 ? decodeTreeEntry(r!) : null, prefix);
      if (order <= 0) l = following(l!);
      if (order >= 0) r = following(r!);
    }
  };
  walk(beforeTreeOid, afterTreeOid, '');
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
