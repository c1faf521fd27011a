/**
 * The parts of commits, trees and tags that git's object walks need — a commit's tree, parents
 * and committer time, a tree's entries, a tag's target — read from one snapshot. A full clone
 * reads every commit and tree of the repository, so these are parsed straight from the stored
 * bytes (no message or identity decoding, names only as latin1); parsed commits are kept for the
 * walk, which visits many of them more than once.
 */
import { ServiceError } from '../errors.js';
import type { ObjectType } from '../vcs/object-store.js';
import { vanished, type ObjectReader } from '../storage/read/object-reader.js';

export interface CommitNode {
  oid: string;
  tree: string;
  parents: string[];
  /** Committer time, unix seconds. */
  time: number;
}

export type EntryKind = 'tree' | 'blob' | 'gitlink';

export interface TreeEntryRef {
  kind: EntryKind;
  oid: string;
  /** The name's bytes as latin1 (one char per byte): enough to pair entries by name. */
  name: string;
}

const corrupt = (what: string, oid: string): ServiceError => new ServiceError('INTERNAL_ERROR', `corrupt ${what} ${oid}`);

export class ObjectGraph {
  private readonly commits = new Map<string, CommitNode>();

  constructor(readonly objects: ObjectReader) {}

  type(oid: string): ObjectType | undefined {
    return this.objects.typeAndSize(oid)?.type;
  }

  /** The commit, or undefined when `oid` is not a commit of the repository. */
  commit(oid: string): CommitNode | undefined {
    let node = this.commits.get(oid);
    if (node) return node;
    const view = this.objects.view(oid, true);
    if (!view || view[0] !== 1) return undefined;
    node = parseCommitNode(oid, view);
    this.commits.set(oid, node);
    return node;
  }

  /** Like `commit`, for an oid the walk reached through the graph: it must be there, and a commit. */
  reachedCommit(oid: string): CommitNode {
    const node = this.commit(oid);
    if (!node) throw this.objects.typeAndSize(oid) ? corrupt('commit', oid) : vanished('commit', oid);
    return node;
  }

  /** A tag object's target, or undefined when `oid` is not a tag. */
  tagTarget(oid: string): { oid: string; type: ObjectType } | undefined {
    const view = this.objects.view(oid);
    if (!view || view[0] !== 4) return undefined;
    const m = /^object ([0-9a-f]{40})\ntype (commit|tree|blob|tag)\n/.exec(view.toString('latin1', 1, 80));
    if (!m) throw corrupt('tag', oid);
    return { oid: m[1]!, type: m[2] as ObjectType };
  }

  /** Follows tag objects to the object they finally name. */
  peel(oid: string): string {
    let current = oid;
    for (let depth = 0; depth < 16; depth++) {
      const target = this.tagTarget(current);
      if (!target) return current;
      current = target.oid;
    }
    return current;
  }

  /** A tree's stored bytes, valid for as long as the caller holds them. */
  treeBytes(oid: string): Buffer {
    const bytes = this.objects.stableView(oid);
    if (!bytes) throw vanished('tree', oid);
    if (bytes[0] !== 2) throw corrupt('tree', oid);
    return bytes;
  }

  /** The entries of a tree, names included. */
  treeEntries(oid: string): TreeEntryRef[] {
    const entries: TreeEntryRef[] = [];
    const cursor = new TreeCursor(oid, this.treeBytes(oid));
    while (cursor.next()) entries.push({ kind: cursor.kind, oid: cursor.oidHex(), name: cursor.name() });
    return entries;
  }
}

/**
 * Steps through a tree's entries in its stored bytes (type byte first) without making objects or
 * strings of them: the entry's kind, where its oid's 20 bytes start, and its name on request.
 */
export class TreeCursor {
  kind: EntryKind = 'blob';
  oidAt = 0;
  private nameStart = 0;
  private pos = 1;

  constructor(
    private readonly oid: string,
    readonly bytes: Buffer,
  ) {}

  next(): boolean {
    const bytes = this.bytes;
    const start = this.pos;
    if (start >= bytes.length) return false;
    let space = start;
    while (space < bytes.length && bytes[space] !== 0x20) space++;
    let nul = space + 1;
    while (nul < bytes.length && bytes[nul] !== 0) nul++;
    if (nul + 21 > bytes.length) throw corrupt('tree', this.oid);
    // Modes: 40000 (also an old zero-padded 040000) a tree, 160000 a submodule, else a file.
    const c0 = bytes[start];
    this.kind = c0 === 0x34 || (c0 === 0x30 && bytes[start + 1] === 0x34) ? 'tree' : space - start === 6 && c0 === 0x31 && bytes[start + 1] === 0x36 ? 'gitlink' : 'blob';
    this.nameStart = space + 1;
    this.oidAt = nul + 1;
    this.pos = nul + 21;
    return true;
  }

  oidHex(): string {
    return this.bytes.toString('hex', this.oidAt, this.oidAt + 20);
  }

  /** The name's bytes as latin1 (one char per byte): enough to pair entries by name. */
  name(): string {
    return this.bytes.toString('latin1', this.nameStart, this.oidAt - 1);
  }
}

function parseCommitNode(oid: string, view: Buffer): CommitNode {
  // The value is the type byte, then `tree <oid>\n(parent <oid>\n)*author …\ncommitter … <time> <tz>\n`.
  if (view.toString('latin1', 1, 6) !== 'tree ') throw corrupt('commit', oid);
  const tree = view.toString('latin1', 6, 46);
  let pos = 47;
  const parents: string[] = [];
  while (view.toString('latin1', pos, pos + 7) === 'parent ') {
    parents.push(view.toString('latin1', pos + 7, pos + 47));
    pos += 48;
  }
  const committer = view.indexOf('\ncommitter ', pos - 1, 'latin1');
  if (committer < 0) throw corrupt('commit', oid);
  const end = view.indexOf(0x0a, committer + 1);
  const line = view.toString('latin1', committer + 11, end < 0 ? view.length : end);
  const m = /> (-?\d+)(?: [+-]\d{4})?\s*$/.exec(line);
  return { oid, tree, parents, time: m ? Number(m[1]) : 0 };
}
