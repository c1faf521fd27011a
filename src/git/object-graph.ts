/**
 * The parts of commits, trees and tags that git's object walks need — a commit's tree, parents
 * and committer time, a tree's entries, a tag's target — read from one snapshot. A full clone
 * reads every commit and tree of the repository, so these are parsed straight from the stored
 * bytes (no message or identity decoding, names only as latin1); parsed commits are kept for the
 * walk, which visits many of them more than once.
 */
import { ServiceError } from '../errors.js';
import type { ObjectType } from '../vcs/object-store.js';
import type { SnapshotObjects } from '../storage/read/snapshot-objects.js';

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
  /** The name's bytes as latin1 (one char per byte): enough to pair entries by name; '' unless asked for. */
  name: string;
}

const corrupt = (what: string, oid: string): ServiceError => new ServiceError('INTERNAL_ERROR', `corrupt ${what} ${oid}`);

export class ObjectGraph {
  private readonly commits = new Map<string, CommitNode>();

  constructor(readonly objects: SnapshotObjects) {}

  type(oid: string): ObjectType | undefined {
    return this.objects.typeAndSize(oid)?.type;
  }

  /** The commit, or undefined when `oid` is not a commit of the repository. */
  commit(oid: string): CommitNode | undefined {
    let node = this.commits.get(oid);
    if (node) return node;
    const view = this.objects.view(oid);
    if (!view || view[0] !== 1) return undefined;
    node = parseCommitNode(oid, view);
    this.commits.set(oid, node);
    return node;
  }

  /** Like `commit`, for an oid the walk reached through the graph: missing is corruption. */
  reachedCommit(oid: string): CommitNode {
    const node = this.commit(oid);
    if (!node) throw new ServiceError('INTERNAL_ERROR', `missing commit ${oid}`);
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

  /** The entries of a tree, with their names when `names` (a tree the repository lacks is corruption). */
  treeEntries(oid: string, names: boolean): TreeEntryRef[] {
    const view = this.objects.view(oid);
    if (!view || view[0] !== 2) throw new ServiceError('INTERNAL_ERROR', `missing tree ${oid}`);
    return parseTreeEntries(oid, view, names);
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

function parseTreeEntries(oid: string, view: Buffer, names: boolean): TreeEntryRef[] {
  const entries: TreeEntryRef[] = [];
  let pos = 1;
  while (pos < view.length) {
    const space = view.indexOf(0x20, pos);
    const nul = space < 0 ? -1 : view.indexOf(0, space + 1);
    if (nul < 0 || nul + 21 > view.length) throw corrupt('tree', oid);
    // Modes: 40000 (also an old zero-padded 040000) a tree, 160000 a submodule, else a file.
    const kind: EntryKind = view[pos] === 0x34 || (view[pos] === 0x30 && view[pos + 1] === 0x34) ? 'tree' : space - pos === 6 && view[pos] === 0x31 && view[pos + 1] === 0x36 ? 'gitlink' : 'blob';
    entries.push({ kind, oid: view.toString('hex', nul + 1, nul + 21), name: names ? view.toString('latin1', space + 1, nul) : '' });
    pos = nul + 21;
  }
  return entries;
}
