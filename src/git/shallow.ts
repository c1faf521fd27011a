/**
 * Shallow fetches (`--depth`, `--shallow-since`, `--shallow-exclude`, `--deepen`, `--unshallow`):
 * the new shallow boundary the server announces (`shallow <oid>`), the client's shallow commits
 * it lifts (`unshallow <oid>`), and what the object walk must respect. It follows git's own
 * upload-pack (`deepen`, `deepen_by_rev_list`, `send_unshallow` in upload-pack.c):
 *
 * - `deepen N`: commits N deep from the wants form the boundary; with `deepen-relative`, N deeper
 *   than the client's current boundary; `INFINITE_DEPTH` lifts every boundary.
 * - `deepen-since` / `deepen-not`: the commits reachable from the wants that are newer than the
 *   time and not reachable from the named refs; those with a parent outside are the boundary.
 * - A client's shallow commit that the new range reaches is lifted: its parents are sent (they
 *   become wants of the walk), while every shallow commit, old or new, stays a boundary of it.
 */
import { invalid } from '../errors.js';
import { walkCommits } from './commit-walk.js';
import { INFINITE_DEPTH, type FetchRequest } from './fetch-request.js';
import type { ObjectGraph } from './object-graph.js';

export interface ShallowPlan {
  /** Whether the response carries shallow information at all. */
  announce: boolean;
  shallow: string[];
  unshallow: string[];
  /** Commits whose parents the walk does not follow. */
  grafts: Set<string>;
  /** Parents of lifted commits: sent as if wanted. */
  extraWants: string[];
}

export function* planShallow(
  graph: ObjectGraph,
  request: FetchRequest,
  resolveRef: (name: string) => string | undefined,
): Generator<number, ShallowPlan> {
  // Shallow lines naming commits we do not have are ignored, as git does.
  const clientShallow = new Set(request.shallows.filter((oid) => graph.commit(oid) !== undefined));
  const deepenByRevs = request.deepenSince !== null || request.deepenNot.length > 0;
  const plan: ShallowPlan = {
    announce: request.depth > 0 || deepenByRevs || request.shallows.length > 0,
    shallow: [],
    unshallow: [],
    grafts: new Set(clientShallow),
    extraWants: [],
  };
  if (request.depth > 0 && deepenByRevs) throw invalid('upload-pack: deepen and deepen-since (or deepen-not) cannot be used together');
  const wantCommits = request.wants.map((oid) => graph.peel(oid)).filter((oid) => graph.commit(oid) !== undefined);

  /** Commits inside the new range (not a boundary): a client's shallow commit among them is lifted. */
  let inside = new Set<string>();
  if (request.depth === INFINITE_DEPTH) {
    inside = new Set(clientShallow);
  } else if (request.depth > 0) {
    const heads = request.deepenRelative ? [...clientShallow] : wantCommits;
    const depth = request.deepenRelative ? request.depth + 1 : request.depth;
    const boundary: string[] = [];
    ({ inside } = withinDepth(graph, heads, depth, boundary));
    for (const oid of boundary) if (!clientShallow.has(oid)) plan.shallow.push(oid);
  } else if (deepenByRevs) {
    const excluded: string[] = [];
    for (const name of request.deepenNot) {
      const oid = resolveRef(name);
      if (oid === undefined) throw invalid(`upload-pack: ambiguous deepen-not: ${name}`);
      const commit = graph.peel(oid);
      if (graph.commit(commit)) excluded.push(commit);
    }
    const walk = walkCommits(graph, wantCommits, excluded, { grafts: new Set(), since: request.deepenSince });
    let step = walk.next();
    while (!step.done) {
      yield step.value;
      step = walk.next();
    }
    const included = step.value.included;
    if (included.length === 0) throw invalid('upload-pack: no commits selected for shallow requests');
    const selected = new Set(included.map((c) => c.oid));
    for (const commit of included) {
      if (commit.parents.some((p) => !selected.has(p))) {
        if (!clientShallow.has(commit.oid)) plan.shallow.push(commit.oid);
      } else inside.add(commit.oid);
    }
  }
  for (const oid of plan.shallow) plan.grafts.add(oid);
  for (const oid of clientShallow) {
    if (!inside.has(oid)) continue;
    plan.unshallow.push(oid);
    for (const parent of graph.reachedCommit(oid).parents) plan.extraWants.push(parent);
  }
  return plan;
}

/**
 * Breadth-first from the heads: a commit `depth` commits deep (the head itself being 1) is on the
 * boundary, anything nearer is inside. Each commit counts at its shortest distance.
 */
function withinDepth(graph: ObjectGraph, heads: readonly string[], depth: number, boundary: string[]): { inside: Set<string> } {
  const distance = new Map<string, number>();
  const inside = new Set<string>();
  let frontier = [...new Set(heads)];
  for (const oid of frontier) distance.set(oid, 1);
  for (let level = 1; frontier.length > 0; level++) {
    const next: string[] = [];
    for (const oid of frontier) {
      if (level >= depth) {
        boundary.push(oid);
        continue;
      }
      inside.add(oid);
      for (const parent of graph.reachedCommit(oid).parents) {
        if (distance.has(parent)) continue;
        distance.set(parent, level + 1);
        next.push(parent);
      }
    }
    frontier = next;
  }
  return { inside };
}
