/**
 * The commit half of git's object walk (`rev-list tips ^excluded`): the commits reachable from
 * the tips and not from the excluded commits, found newest first by committer time, as git's own
 * limited revision walk does. The walk ends as soon as every commit still queued is excluded, so a
 * fetch of a few new commits reads a few commits, not the repository's history. Committer clocks
 * can be wrong; a commit found excluded after it was taken in is dropped at the end (its
 * exclusion spreads to the parents it already reached), so skew costs extra work, never a wrong
 * answer that leaves the client without an object it needs.
 *
 * `grafts` are shallow boundaries: their parents are not followed. `since` (deepen-since)
 * excludes commits older than it, and everything they reach, as `rev-list --max-age` does.
 */
import { BinaryHeap } from '../binary-heap.js';
import type { CommitNode, ObjectGraph } from './object-graph.js';

export interface CommitWalkOptions {
  grafts: ReadonlySet<string>;
  since?: number | null;
}

export interface CommitWalk {
  /** Reachable from the tips and not excluded, newest first. */
  included: CommitNode[];
  /** Excluded commits that are parents of included ones: the client's side of the boundary. */
  edges: CommitNode[];
}

interface Entry {
  node: CommitNode;
  excluded: boolean;
  queued: boolean;
  expanded: boolean;
  seq: number;
}

/** Yields every `PROGRESS_EVERY` commits taken, so the caller can report progress and let other work run. */
export const PROGRESS_EVERY = 1024;

export function* walkCommits(graph: ObjectGraph, tips: readonly string[], excluded: readonly string[], opts: CommitWalkOptions): Generator<number, CommitWalk> {
  const entries = new Map<string, Entry>();
  const heap = new BinaryHeap(before);
  let includedQueued = 0;
  let seq = 0;
  const parents = (e: Entry): readonly string[] => (opts.grafts.has(e.node.oid) ? [] : e.node.parents);

  const exclude = (start: Entry): void => {
    const stack = [start];
    while (stack.length) {
      const e = stack.pop()!;
      if (e.excluded) continue;
      e.excluded = true;
      if (e.queued) includedQueued--;
      if (!e.expanded) continue;
      for (const p of parents(e)) {
        const known = entries.get(p);
        if (known) stack.push(known);
        else add(p, true);
      }
    }
  };
  const add = (oid: string, asExcluded: boolean): void => {
    const known = entries.get(oid);
    if (known) {
      if (asExcluded) exclude(known);
      return;
    }
    const e: Entry = { node: graph.reachedCommit(oid), excluded: asExcluded, queued: true, expanded: false, seq: seq++ };
    entries.set(oid, e);
    heap.push(e);
    if (!asExcluded) includedQueued++;
  };

  for (const oid of excluded) add(oid, true);
  for (const oid of tips) add(oid, false);

  const taken: Entry[] = [];
  let steps = 0;
  while (includedQueued > 0) {
    const e = heap.pop()!;
    e.queued = false;
    if (!e.excluded) includedQueued--;
    e.expanded = true;
    if (!e.excluded && opts.since != null && e.node.time < opts.since) e.excluded = true;
    if (!e.excluded) taken.push(e);
    for (const p of parents(e)) add(p, e.excluded);
    if (++steps % PROGRESS_EVERY === 0) yield steps;
  }

  const included = taken.filter((e) => !e.excluded);
  const edges = new Map<string, CommitNode>();
  for (const e of included) {
    for (const p of parents(e)) {
      const parent = entries.get(p);
      if (parent?.excluded) edges.set(p, parent.node);
    }
  }
  return { included: included.map((e) => e.node), edges: [...edges.values()] };
}

/** Newest committer time first (ties: first queued first). */
function before(a: Entry, b: Entry): boolean {
  return a.node.time > b.node.time || (a.node.time === b.node.time && a.seq < b.seq);
}
