/**
 * The changed files between two trees as a diff shows them: added, modified, deleted, and
 * renamed — a deleted and an added path with identical content (same blob, same kind of entry)
 * are one rename, paired in path order. Empty files are never paired (as in git: every empty
 * file has the same content, so a pairing would be arbitrary).
 */
import type { TreeValue } from '../git-object.js';
import type { ObjectStore } from '../object-store.js';
import { diffTrees } from '../tree-diff.js';

export type FileChangeStatus = 'added' | 'modified' | 'deleted' | 'renamed';

export interface FileChange {
  /** The new path (the old one for a deletion). */
  path: string;
  status: FileChangeStatus;
  /** The path before a rename, else null. */
  oldPath: string | null;
  before: TreeValue | null;
  after: TreeValue | null;
}

const EMPTY_BLOB_OID = 'e69de29bb2d1d6434b8b29ae775ad8c2e48c5391';
const kindOf = (mode: string): string => (mode === '120000' ? 'link' : mode === '160000' ? 'gitlink' : 'file');
const byPath = (a: FileChange, b: FileChange): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

export function changedFiles(store: ObjectStore, beforeTreeOid: string, afterTreeOid: string): FileChange[] {
  const raw = diffTrees(store, beforeTreeOid, afterTreeOid);
  const deletedByContent = new Map<string, string[]>();
  for (const c of raw) {
    if (c.status !== 'deleted' || c.before!.oid === EMPTY_BLOB_OID) continue;
    const key = `${kindOf(c.before!.mode)} ${c.before!.oid}`;
    const list = deletedByContent.get(key);
    if (list) list.push(c.path);
    else deletedByContent.set(key, [c.path]);
  }
  const renamedFrom = new Map<string, string>();
  const out: FileChange[] = [];
  for (const c of raw) {
    if (c.status !== 'added') continue;
    const candidates = deletedByContent.get(`${kindOf(c.after!.mode)} ${c.after!.oid}`);
    const from = candidates?.shift();
    if (from === undefined) continue;
    renamedFrom.set(c.path, from);
  }
  const consumed = new Set(renamedFrom.values());
  const beforeOf = new Map(raw.filter((c) => c.status === 'deleted').map((c) => [c.path, c.before!]));
  for (const c of raw) {
    if (c.status === 'deleted' && consumed.has(c.path)) continue;
    const from = c.status === 'added' ? renamedFrom.get(c.path) : undefined;
    if (from !== undefined) {
      out.push({ path: c.path, status: 'renamed', oldPath: from, before: beforeOf.get(from)!, after: c.after });
    } else {
      out.push({ path: c.path, status: c.status, oldPath: null, before: c.before, after: c.after });
    }
  }
  return out.sort(byPath);
}
