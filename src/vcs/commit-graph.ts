/**
 * Walks over the git commit graph: ancestry (for the bookmark "advance history" rule) and merge
 * bases (for merging parents' trees). Parsed commits are cached per call only: the graph is
 * immutable, but a walk must not hold memory beyond its own use.
 */
import type { ObjectStore } from './object-store.js';
import { readCommit } from './git-object.js';

interface GraphNode {
  parents: string[];
  time: number;
}

class GraphReader {
  readonly #nodes = new Map<string, GraphNode>();
  constructor(private readonly store: ObjectStore) {}

  node(oid: string): GraphNode {
    let node = this.#nodes.get(oid);
    if (!node) {
      const commit = readCommit(this.store, oid);
      node = { parents: commit.parents, time: commit.committer.timestamp };
      this.#nodes.set(oid, node);
    }
    return node;
  }
}

/**
 * True when `ancestorOid` is `descendantOid` or one of its ancestors. A plain depth-first walk:
 * committer times are not trusted to prune it (imported history may have any clock), so a
 * negative answer walks the descendant's whole history.
 */
export function isAncestor(store: ObjectStore, ancestorOid: string, descendantOid: string): boolean {
  if (ancestorOid === descendantOid) return true;
  const graph = new GraphReader(store);
  const seen = new Set<string>([descendantOid]);
  const stack = [descendantOid];
  while (stack.length > 0) {
    const oid = stack.pop()!;
    for (const parent of graph.node(oid).parents) {
      if (parent === ancestorOid) return true;
      if (!seen.has(parent)) {
        seen.add(parent);
        stack.push(parent);
      }
    }
  }
  return false;
}

const FROM_A = 1;
const FROM_B = 2;
const STALE = 4;
const RESULT = 8;

/**
 * The best common ancestors of two sets of commits (git's `merge-base --all`): painting down
 * from both sides newest first, a commit reached from both is a candidate, and whatever lies
 * below a candidate is stale. Candidates that are ancestors of other candidates are dropped.
 */
export function mergeBases(store: ObjectStore, a: readonly string[], b: readonly string[]): string[] {
  const graph = new GraphReader(store);
  const flags = new Map<string, number>();
  const queue: string[] = [];
  const push = (oid: string, flag: number): void => {
    const before = flags.get(oid) ?? 0;
    if ((before & flag) === flag) return;
    flags.set(oid, before | flag);
    // Keep the queue sorted oldest first so pop() takes the newest commit.
    const time = graph.node(oid).time;
    let lo = 0;
    let hi = queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (graph.node(queue[mid]!).time <= time) lo = mid + 1;
      else hi = mid;
    }
    queue.splice(lo, 0, oid);
  };
  for (const oid of a) push(oid, FROM_A);
  for (const oid of b) push(oid, FROM_B);
  const results: string[] = [];
  while (queue.some((oid) => ((flags.get(oid) ?? 0) & STALE) === 0)) {
    const oid = queue.pop()!;
    let flag = (flags.get(oid) ?? 0) & (FROM_A | FROM_B | STALE);
    if (flag === (FROM_A | FROM_B)) {
      if (((flags.get(oid) ?? 0) & RESULT) === 0) {
        flags.set(oid, (flags.get(oid) ?? 0) | RESULT);
        results.push(oid);
      }
      flag |= STALE;
    }
    for (const parent of graph.node(oid).parents) push(parent, flag);
  }
  // A candidate painted stale later lies below another candidate.
  const candidates = results.filter((oid) => ((flags.get(oid) ?? 0) & STALE) === 0);
  return candidates.filter((oid) => !candidates.some((other) => other !== oid && isAncestor(store, oid, other)));
}
