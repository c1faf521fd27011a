/**
 * The server's side of fetch negotiation: which of the client's `have`s are common, and whether
 * they already bound every want ("ready": git's `ok_to_give_up`), so the client can stop sending
 * haves and take the pack at once. Saying "not ready" is always correct (the client simply sends
 * more haves or `done`), so the check gives up early rather than walking far.
 */
import type { ObjectGraph } from './object-graph.js';

/** Commits read per readiness check before it answers "not ready". */
const READY_BUDGET = 10_000;

/**
 * Whether every want reaches a commit the client has (a common commit or a parent of one)
 * without going back past the oldest common commit's time.
 */
export function readyToSend(graph: ObjectGraph, wants: readonly string[], common: readonly string[]): boolean {
  const theyHave = new Set<string>();
  let cutoff = Infinity;
  for (const oid of common) {
    const commit = graph.commit(oid);
    if (!commit) continue;
    theyHave.add(oid);
    for (const p of commit.parents) theyHave.add(p);
    cutoff = Math.min(cutoff, commit.time);
  }
  if (theyHave.size === 0) return false;
  let budget = READY_BUDGET;
  for (const want of wants) {
    // A want that is not a commit cannot be judged by ancestry: git does not wait for it either.
    const start = graph.peel(want);
    if (!graph.commit(start)) continue;
    const stack = [start];
    const seen = new Set<string>(stack);
    let found = false;
    while (stack.length) {
      const oid = stack.pop()!;
      if (theyHave.has(oid)) {
        found = true;
        break;
      }
      if (--budget < 0) return false;
      const commit = graph.reachedCommit(oid);
      if (commit.time < cutoff) continue;
      for (const p of commit.parents) {
        if (seen.has(p)) continue;
        seen.add(p);
        stack.push(p);
      }
    }
    if (!found) return false;
    // A later want that reaches this one reaches what the client has.
    theyHave.add(start);
  }
  return true;
}
