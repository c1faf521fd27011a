/**
 * Which files differ between two trees (e.g. a change's `files`: paths changed relative to its
 * first parent). Subtrees with equal oids are skipped without being read, so the cost follows
 * the size of the change, not of the repository.
 */
import type { ObjectStore } from './object-store.js';
import { TREE_MODE, readTree } from './git-object.js';
import type { TreeEntry, TreeValue } from './git-object.js';
import { joinPath } from './paths.js';

export interface TreeChange {
  path: string;
  status: 'added' | 'deleted' | 'modified';
  /** null when added. */
  before: TreeValue | null;
  /** null when deleted. */
  after: TreeValue | null;
}

/**
 * Non-directory paths whose entry differs (content or mode), in path order. A file replaced by
 * a directory (or the reverse) is the file deleted and the directory's files added.
 */
export function diffTrees(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string): TreeChange[] {
  const changes: TreeChange[] = [];
  const walk = (before: string | null, after: string | null, prefix: string): void => {
    if (before === after) return;
    const left = new Map<string, TreeEntry>(before ? readTree(store, before).map((e) => [e.name, e]) : []);
    const right = new Map<string, TreeEntry>(after ? readTree(store, after).map((e) => [e.name, e]) : []);
    const names = [...new Set([...left.keys(), ...right.keys()])].sort();
    for (const name of names) {
      const l = left.get(name);
      const r = right.get(name);
      if (l && r && l.mode === r.mode && l.oid === r.oid) continue;
      const path = joinPath(prefix, name);
      const lDir = l?.mode === TREE_MODE;
      const rDir = r?.mode === TREE_MODE;
      if (lDir || rDir) walk(lDir ? l.oid : null, rDir ? r.oid : null, path);
      const lFile = l && !lDir ? { mode: l.mode, oid: l.oid } : null;
      const rFile = r && !rDir ? { mode: r.mode, oid: r.oid } : null;
      if (lFile && rFile) changes.push({ path, status: 'modified', before: lFile, after: rFile });
      else if (lFile) changes.push({ path, status: 'deleted', before: lFile, after: null });
      else if (rFile) changes.push({ path, status: 'added', before: null, after: rFile });
    }
  };
  walk(beforeTreeOid, afterTreeOid, '');
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
