/**
 * Reading paths in trees and editing trees. An edit batch loads only the directories on the
 * edited paths and rewrites only those: a change touching 3 files in a repository of 10,000
 * writes a handful of trees, never the whole repository.
 */
import { VcsError } from './errors.js';
import type { ObjectStore } from './object-store.js';
import { EMPTY_TREE_OID, TREE_MODE, readTree, writeTree } from './git-object.js';
import type { FileMode, TreeEntry, TreeValue } from './git-object.js';
import { joinPath, normalizePath, pathSegments } from './paths.js';

export type TreeEdit =
  | { op: 'write'; path: string; blobOid: string; mode: FileMode }
  | { op: 'delete'; path: string }
  | { op: 'rename'; from: string; to: string }
  /** Sets or removes (`value: null`) whatever is at `path`, a directory included; used by merges. */
  | { op: 'set'; path: string; value: TreeValue | null }
  /** Changes nothing: fails (`missing-path`, "cannot <what> …") unless something is at `path` at this point of the batch. */
  | { op: 'require'; path: string; what: string };

/** The value at `path` (the root itself for `""`), or undefined when nothing is there. */
export function lookupPath(store: ObjectStore, rootTreeOid: string, path: string): TreeValue | undefined {
  let current: TreeValue = { mode: TREE_MODE, oid: rootTreeOid };
  for (const segment of pathSegments(path)) {
    if (current.mode !== TREE_MODE) return undefined;
    const entry = readTree(store, current.oid).find((e) => e.name === segment);
    if (!entry) return undefined;
    current = { mode: entry.mode, oid: entry.oid };
  }
  return current;
}

export interface WalkedEntry extends TreeValue {
  /** Full path from the walked tree's root. */
  path: string;
  name: string;
  /** 1 for the walked tree's own entries. */
  depth: number;
}

/**
 * Every entry under a tree, directories included, pre-order in git's tree order. `maxDepth`
 * stops descending (1 = only the tree's own entries); `prefix` is prepended to paths.
 */
export function* walkTree(
  store: ObjectStore,
  treeOid: string,
  options: { maxDepth?: number; prefix?: string } = {},
): Generator<WalkedEntry> {
  const maxDepth = options.maxDepth ?? Infinity;
  function* walk(oid: string, prefix: string, depth: number): Generator<WalkedEntry> {
    for (const entry of readTree(store, oid)) {
      const path = joinPath(prefix, entry.name);
      yield { path, name: entry.name, mode: entry.mode, oid: entry.oid, depth };
      if (entry.mode === TREE_MODE && depth < maxDepth) yield* walk(entry.oid, path, depth + 1);
    }
  }
  yield* walk(treeOid, options.prefix ?? '', 1);
}

/** Every non-directory entry under a tree, with full paths. */
export function listFiles(store: ObjectStore, treeOid: string): WalkedEntry[] {
  const files: WalkedEntry[] = [];
  for (const entry of walkTree(store, treeOid)) if (entry.mode !== TREE_MODE) files.push(entry);
  return files;
}

// ---- editing -------------------------------------------------------------------------------

/** A directory being edited: its entries are loaded on first use; `dirty` means rewrite it. */
class DirNode {
  #children: Map<string, TreeValue | DirNode> | undefined;
  dirty: boolean;

  constructor(
    private readonly store: ObjectStore,
    readonly oid: string | null,
  ) {
    this.dirty = oid === null;
  }

  get children(): Map<string, TreeValue | DirNode> {
    if (!this.#children) {
      this.#children = new Map();
      if (this.oid !== null) {
        for (const e of readTree(this.store, this.oid)) this.#children.set(e.name, { mode: e.mode, oid: e.oid });
      }
    }
    return this.#children;
  }

  /** The child directory `name` as a node (loading it), undefined when absent or not a directory. */
  childDir(name: string): DirNode | undefined {
    const child = this.children.get(name);
    if (child instanceof DirNode) return child;
    if (child === undefined || child.mode !== TREE_MODE) return undefined;
    const node = new DirNode(this.store, child.oid);
    this.children.set(name, node);
    return node;
  }

  /** Writes this directory if it changed; null when it ended up empty (git has no empty dirs). */
  flush(): string | null {
    if (!this.dirty) return this.oid;
    const entries: TreeEntry[] = [];
    for (const [name, child] of this.children) {
      if (child instanceof DirNode) {
        const oid = child.flush();
        if (oid !== null) entries.push({ name, mode: TREE_MODE, oid });
      } else {
        entries.push({ name, mode: child.mode, oid: child.oid });
      }
    }
    return entries.length === 0 ? null : writeTree(this.store, entries);
  }
}

type Slot = TreeValue | DirNode;

function fail(kind: 'invalid-edit' | 'missing-path', message: string, index: number, path: string): never {
  throw new VcsError(kind, message, { path, op_index: index });
}

class TreeEditor {
  readonly root: DirNode;

  constructor(
    private readonly store: ObjectStore,
    rootTreeOid: string,
  ) {
    this.root = new DirNode(store, rootTreeOid);
  }

  /** The directories from the root to the parent of `path`, or undefined when one is missing. */
  private parents(path: string, create: boolean, index: number): DirNode[] | undefined {
    const segments = pathSegments(path);
    const chain = [this.root];
    let node = this.root;
    for (let i = 0; i < segments.length - 1; i++) {
      const name = segments[i]!;
      let next = node.childDir(name);
      if (!next) {
        const existing = node.children.get(name);
        if (existing !== undefined) {
          if (!create) return undefined;
          fail('invalid-edit', `cannot write ${JSON.stringify(path)}: ${JSON.stringify(segments.slice(0, i + 1).join('/'))} is a file`, index, path);
        }
        if (!create) return undefined;
        next = new DirNode(this.store, null);
        node.children.set(name, next);
      }
      chain.push(next);
      node = next;
    }
    return chain;
  }

  private static touch(chain: DirNode[]): void {
    for (const node of chain) node.dirty = true;
  }

  get(path: string): Slot | undefined {
    const chain = this.parents(path, false, -1);
    return chain?.[chain.length - 1]!.children.get(pathSegments(path).pop()!);
  }

  put(path: string, value: Slot, index: number, replaceDirectory: boolean): void {
    const chain = this.parents(path, true, index)!;
    const name = pathSegments(path).pop()!;
    const parent = chain[chain.length - 1]!;
    const existing = parent.children.get(name);
    const existingIsDir = existing instanceof DirNode || existing?.mode === TREE_MODE;
    if (existingIsDir && !replaceDirectory) {
      fail('invalid-edit', `cannot write ${JSON.stringify(path)}: it is a directory (delete it first)`, index, path);
    }
    parent.children.set(name, value);
    TreeEditor.touch(chain);
  }

  remove(path: string, index: number, what: string): Slot {
    const chain = this.parents(path, false, index);
    const name = pathSegments(path).pop()!;
    const parent = chain?.[chain.length - 1];
    const existing = parent?.children.get(name);
    if (!chain || !parent || existing === undefined) {
      fail('missing-path', `cannot ${what} ${JSON.stringify(path)}: no such file or directory`, index, path);
    }
    parent.children.delete(name);
    TreeEditor.touch(chain);
    return existing;
  }

  apply(edit: TreeEdit, index: number): void {
    switch (edit.op) {
      case 'write': {
        const path = checkedPath(edit.path, index);
        if (edit.mode === '120000' && /^\.gitmodules$/i.test(pathSegments(path).pop()!)) {
          fail('invalid-edit', '".gitmodules" cannot be a symlink', index, path);
        }
        this.put(path, { mode: edit.mode, oid: edit.blobOid }, index, false);
        return;
      }
      case 'delete':
        this.remove(checkedPath(edit.path, index), index, 'delete');
        return;
      case 'rename': {
        const from = checkedPath(edit.from, index);
        const to = checkedPath(edit.to, index);
        const moved = this.get(from);
        if (moved === undefined) fail('missing-path', `cannot rename ${JSON.stringify(from)}: no such file or directory`, index, from);
        if (from === to) return;
        const isDir = moved instanceof DirNode || moved.mode === TREE_MODE;
        if (isDir && to.startsWith(`${from}/`)) {
          fail('invalid-edit', `cannot rename directory ${JSON.stringify(from)} into itself`, index, to);
        }
        this.remove(from, index, 'rename');
        this.put(to, moved, index, false);
        return;
      }
      case 'set': {
        const path = checkedPath(edit.path, index);
        if (edit.value === null) {
          if (this.get(path) !== undefined) this.remove(path, index, 'delete');
        } else {
          this.put(path, edit.value, index, true);
        }
        return;
      }
      case 'require': {
        const path = checkedPath(edit.path, index);
        if (this.get(path) === undefined) fail('missing-path', `cannot ${edit.what} ${JSON.stringify(path)}: no such file or directory`, index, path);
        return;
      }
    }
  }

  flush(): string {
    return this.root.flush() ?? writeTree(this.store, []);
  }
}

function checkedPath(path: string, index: number): string {
  try {
    return normalizePath(path);
  } catch (err) {
    if (err instanceof VcsError) throw new VcsError(err.kind, err.message, { ...err.details, op_index: index });
    throw err;
  }
}

/**
 * Applies edits in order to a root tree and returns the new root tree oid (the empty tree when
 * nothing is left). Errors carry `details.path` and `details.op_index` (the edit's index):
 * - write: creates missing parent directories, replaces a file; a file where a parent directory
 *   is needed, or a directory at the path, → `invalid-edit`.
 * - delete: a directory path deletes its subtree; missing → `missing-path`.
 * - rename: moves a file or directory (replacing a file at `to`); missing `from` → `missing-path`.
 * - require: nothing at the path at that point of the batch → `missing-path`.
 * Directories left empty disappear.
 */
export function applyTreeEdits(store: ObjectStore, rootTreeOid: string, edits: readonly TreeEdit[]): string {
  if (edits.length === 0) return rootTreeOid;
  const editor = new TreeEditor(store, rootTreeOid);
  edits.forEach((edit, index) => editor.apply(edit, index));
  return editor.flush();
}

/** Makes sure the empty tree object exists (commits and conflict layouts may point at it). */
export function writeEmptyTree(store: ObjectStore): string {
  return store.has(EMPTY_TREE_OID) ? EMPTY_TREE_OID : writeTree(store, []);
}
