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
 * A base (reachable-sets.ts) is a set of objects already known to be in the pack, with everything
 * they reach, and the commits it was walked from: those commits count as the client's, and the
 * walk neither sends nor enters what the base holds, so it reads only what the base lacks.
 *
 * The result lists the commits (newest first), trees and blobs in pack order, and the tags apart:
 * a base holds what commits reach, never the tags a request adds. Its memory is proportional to
 * the number of objects, never their size.
 */
import { walkCommits, PROGRESS_EVERY, type CommitWalk } from './commit-walk.js';
import type { ObjectFilter } from './object-filter.js';
import { TreeCursor, type CommitNode, type ObjectGraph } from './object-graph.js';
import { OidList } from './oid-list.js';
import { OidSet } from './oid-set.js';
import type { SortedOids } from './sorted-oids.js';

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

/** Objects known to be in the pack already, with everything they reach, and the commits they were walked from. */
export interface WalkBase {
  tips: readonly string[];
  objects: SortedOids;
}

export interface WalkResult {
  /** Commits to send, newest first (the base's not among them). */
  commits: OidList;
  /** Trees and blobs to send, in walk order (the base's not among them). */
  objects: OidList;
  /** Tag objects to send. */
  tags: OidList;
  /** Whether the base was used: not when one of its commits is not reachable from the wants. */
  baseUsed: boolean;
}

/** The wants by what they name: tags (sent with what they name), commits, and trees and blobs named directly. */
export interface ClassifiedWants {
  tags: string[];
  commits: string[];
  trees: string[];
  blobs: string[];
}

export function classifyWants(graph: ObjectGraph, wants: readonly string[]): ClassifiedWants {
  const out: ClassifiedWants = { tags: [], commits: [], trees: [], blobs: [] };
  for (const want of wants) {
    let oid = want;
    for (let depth = 0; depth < 16; depth++) {
      const target = graph.tagTarget(oid);
      if (!target) break;
      out.tags.push(oid);
      oid = target.oid;
    }
    const type = graph.type(oid);
    if (type === 'commit') out.commits.push(oid);
    else if (type === 'tree') out.trees.push(oid);
    else if (type === 'blob') out.blobs.push(oid);
  }
  return out;
}

/**
 * The tag objects a pack holding `inPack` carries: the wanted ones, and with include-tag every
 * annotated tag whose object is in the pack (with any tags between).
 */
export function tagObjects(graph: ObjectGraph, wanted: readonly string[], includeTags: readonly string[], inPack: (oid: string) => boolean): OidList {
  const tags = new OidList(wanted.length + 1);
  const seen = new Set<string>();
  const add = (oid: string): void => {
    if (seen.has(oid)) return;
    seen.add(oid);
    tags.push(oid);
  };
  for (const tag of wanted) add(tag);
  for (const tag of includeTags) {
    if (seen.has(tag)) continue;
    const chain = [tag];
    let target = graph.tagTarget(tag);
    while (target?.type === 'tag') {
      chain.push(target.oid);
      target = graph.tagTarget(target.oid);
    }
    if (target && inPack(target.oid)) for (const oid of chain) add(oid);
  }
  return tags;
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

export function* walkObjects(graph: ObjectGraph, request: WalkRequest, base: WalkBase | null = null, wants = classifyWants(graph, request.wants)): Generator<number, WalkResult> {
  const common = request.common.filter((oid) => graph.commit(oid) !== undefined);

  const walk = (excluded: readonly string[]): Generator<number, CommitWalk> => walkCommits(graph, wants.commits, excluded, { grafts: request.grafts });
  // A base another request of this thread made from a later snapshot may name commits this one lacks.
  if (base && !base.tips.every((tip) => graph.commit(tip) !== undefined)) base = null;
  let commits = yield* walk(base ? [...common, ...base.tips] : common);
  if (base) {
    // Every commit of the base must be reachable from the wants, or the base would add objects
    // the wants do not reach: a base commit is then a want or an edge of the walk.
    const reached = new Set([...wants.commits, ...commits.edges.map((e) => e.oid)]);
    if (!base.tips.every((tip) => reached.has(tip))) {
      base = null;
      commits = yield* walk(common);
    }
  }
  const { included, edges } = commits;
  const known = base?.objects ?? null;
  const sent = new OidSet();
  const commitList = new OidList(included.length);
  const objects = new OidList();
  const theirs = new OidSet();
  const add = (oid: string): void => {
    if (sent.add(oid)) objects.push(oid);
  };
  for (const commit of included) if (sent.add(commit.oid)) commitList.push(commit.oid);

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
      if (++visited % PROGRESS_EVERY === 0) yield commitList.length + objects.length;
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
        if (cursor.kind === 'gitlink' || theirs.hasAt(bytes, at) || known?.hasAt(bytes, at)) continue;
        if (cursor.kind === 'blob') {
          if (!sent.hasAt(bytes, at) && wantsBlob(cursor, depth)) {
            sent.addAt(bytes, at);
            objects.pushAt(bytes, at);
          }
          continue;
        }
        if (depth >= depthLimit) continue;
        let tree: string;
        if (depthLimit === Infinity) {
          // The common case: one test on the entry's bytes, a string only for a tree new to the pack.
          if (!sent.addAt(bytes, at)) continue;
          objects.pushAt(bytes, at);
          tree = cursor.oidHex();
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

  for (const commit of included) {
    if (theirs.has(commit.tree) || known?.has(commit.tree) || !firstVisit(commit.tree, 0)) continue;
    yield* walkTree(commit.tree, edgeTrees.filter((t) => t !== commit.tree), false);
  }
  for (const tree of wants.trees) if (!sent.has(tree)) yield* walkTree(tree, [], true);
  for (const blob of wants.blobs) add(blob);

  const inPack = (oid: string): boolean => sent.has(oid) || known?.has(oid) === true;
  return { commits: commitList, objects, tags: tagObjects(graph, wants.tags, request.includeTags, inPack), baseUsed: base !== null };
}
