/**
 * Which objects a fetch sends: everything reachable from the wants, minus what the client has
 * (reachable from the common commits) and what lies beyond the shallow boundaries, with the
 * partial-clone filter applied. The commits come from `walkCommits`; trees and blobs are then
 * walked from each new commit's root tree.
 *
 * What the client has is learned path by path instead of by walking whole histories: the trees
 * of the edge commits (its commits that are parents of new ones) are read at the same paths as
 * the new trees being walked, and whatever they hold is the client's. A fetch of one commit that
 * changed one file reads the few trees along that file's path on both sides. An object the client
 * has at another path may be sent again; git's own walk makes the same trade.
 *
 * The result is the list of oids in pack order: commits newest first, then tags, then trees and
 * blobs in walk order. Its memory is proportional to the number of objects, never their size.
 */
import { walkCommits, PROGRESS_EVERY } from './commit-walk.js';
import type { ObjectFilter } from './object-filter.js';
import { TreeCursor, type CommitNode, type ObjectGraph } from './object-graph.js';
import { OidSet } from './oid-set.js';

export interface WalkRequest {
  wants: readonly string[];
  /** Commits (and other objects) both sides have. */
  common: readonly string[];
  /** Shallow boundaries: commits whose parents are not sent. */
  grafts: ReadonlySet<string>;
  filter: ObjectFilter | null;
  /** Annotated tags to send when what they name is sent (`include-tag`): tag oids. */
  includeTags: readonly string[];
}

const NONE: string[] = [];

/** Edge commits whose trees are compared path by path (the newest ones: the likeliest bases). */
const MAX_EDGES = 16;

interface TreeVisit {
  oid: string;
  depth: number;
  /** The client's trees at the same path (edge commits' trees), other than this one. */
  theirs: string[];
}

export function* walkObjects(graph: ObjectGraph, request: WalkRequest): Generator<number, string[]> {
  const sent = new OidSet();
  const order: string[] = [];
  const theirs = new OidSet();
  const add = (oid: string): void => {
    if (sent.add(oid)) order.push(oid);
  };

  // Wants: tags are sent with what they name; commits start the walk; trees and blobs named by
  // the client are sent whatever the filter says.
  const tips: string[] = [];
  const tags: string[] = [];
  const userTrees: string[] = [];
  const userBlobs: string[] = [];
  for (const want of request.wants) {
    let oid = want;
    for (let depth = 0; depth < 16; depth++) {
      const target = graph.tagTarget(oid);
      if (!target) break;
      tags.push(oid);
      oid = target.oid;
    }
    const type = graph.type(oid);
    if (type === 'commit') tips.push(oid);
    else if (type === 'tree') userTrees.push(oid);
    else if (type === 'blob') userBlobs.push(oid);
  }
  const common = request.common.filter((oid) => graph.commit(oid) !== undefined);

  const walk = walkCommits(graph, tips, common, { grafts: request.grafts });
  let step = walk.next();
  while (!step.done) {
    yield step.value;
    step = walk.next();
  }
  const { included, edges } = step.value;
  for (const commit of included) add(commit.oid);

  const edgeTrees = [...edges]
    .sort((a: CommitNode, b: CommitNode) => b.time - a.time)
    .slice(0, MAX_EDGES)
    .map((e) => e.tree);
  for (const tree of edgeTrees) theirs.add(tree);

  const filter = request.filter;
  // Under tree:<depth>, trees and blobs that deep or deeper are not sent (root trees are at 0).
  const depthLimit = filter?.kind === 'tree' ? filter.depth : Infinity;
  // …and a tree reached again nearer the root must be walked again.
  const treeDepths = new Map<string, number>();
  const firstVisit = (oid: string, depth: number): boolean => {
    if (depthLimit === Infinity) return !sent.has(oid);
    const before = treeDepths.get(oid);
    if (before !== undefined && before <= depth) return false;
    treeDepths.set(oid, depth);
    return true;
  };
  const wantsBlob = (cursor: TreeCursor, depth: number): boolean => {
    if (!filter) return true;
    if (filter.kind === 'blob:none') return false;
    if (filter.kind === 'tree') return depth < depthLimit;
    return (graph.objects.typeAndSize(cursor.oidHex())?.size ?? 0) < filter.bytes;
  };

  let visited = 0;
  const stack: TreeVisit[] = [];
  /** A tree and what lies below it; `userGiven` sends the tree itself whatever the filter says. */
  function* walkTree(oid: string, theirsHere: string[], userGiven: boolean): Generator<number> {
    if (userGiven || depthLimit > 0) add(oid);
    // Entries lie one deeper than their tree: none is sent when that is already too deep.
    if (depthLimit <= 1) return;
    stack.push({ oid, depth: 0, theirs: theirsHere });
    while (stack.length) {
      const visit = stack.pop()!;
      if (++visited % PROGRESS_EVERY === 0) yield order.length;
      const depth = visit.depth + 1;
      // The client's trees at this path: what they hold is the client's, subtrees paired by name.
      const paired = visit.theirs.length > 0;
      const theirsByName = new Map<string, string[]>();
      for (const other of visit.theirs) {
        for (const entry of graph.treeEntries(other)) {
          if (entry.kind === 'gitlink') continue;
          theirs.add(entry.oid);
          if (entry.kind === 'tree') theirsByName.set(entry.name, [...(theirsByName.get(entry.name) ?? []), entry.oid]);
        }
      }
      const cursor = new TreeCursor(visit.oid, graph.treeBytes(visit.oid));
      const bytes = cursor.bytes;
      while (cursor.next()) {
        const at = cursor.oidAt;
        if (cursor.kind === 'gitlink' || theirs.hasAt(bytes, at)) continue;
        if (cursor.kind === 'blob') {
          if (!sent.hasAt(bytes, at) && wantsBlob(cursor, depth)) add(cursor.oidHex());
          continue;
        }
        if (depth >= depthLimit) continue;
        let tree: string;
        if (depthLimit === Infinity) {
          // The common case: one test on the entry's bytes, a string only for a tree new to the pack.
          if (!sent.addAt(bytes, at)) continue;
          tree = cursor.oidHex();
          order.push(tree);
        } else {
          tree = cursor.oidHex();
          if (!firstVisit(tree, depth)) continue;
          add(tree);
        }
        if (depth + 1 >= depthLimit) continue;
        const others = paired ? theirsByName.get(cursor.name())?.filter((o) => o !== tree) : undefined;
        stack.push({ oid: tree, depth, theirs: others ?? NONE });
      }
    }
  }

  for (const tag of tags) add(tag);
  for (const commit of included) {
    if (theirs.has(commit.tree) || !firstVisit(commit.tree, 0)) continue;
    yield* walkTree(commit.tree, edgeTrees.filter((t) => t !== commit.tree), false);
  }
  for (const tree of userTrees) if (!sent.has(tree)) yield* walkTree(tree, [], true);
  for (const blob of userBlobs) add(blob);

  // include-tag: an annotated tag whose object is in the pack comes along (with any tags between).
  for (const tag of request.includeTags) {
    if (sent.has(tag)) continue;
    const chain = [tag];
    let target = graph.tagTarget(tag);
    while (target?.type === 'tag') {
      chain.push(target.oid);
      target = graph.tagTarget(target.oid);
    }
    if (target && sent.has(target.oid)) for (const oid of chain) add(oid);
  }
  return order;
}
