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
 * Commits read by all the checks of one request: a v0 round checks again each time its common set
 * grew, and a body of 16 MiB holds a hundred thousand haves.
 */
const ROUND_BUDGET = 100_000;

/**
 * Whether every want reaches a commit the client has (a common commit or a parent of one)
 * without going back past the oldest common commit's time, over a common set that grows as the
 * client's haves are read: each common commit is read once, whatever the number of checks.
 */
export class Readiness {
  private readonly theyHave = new Set<string>();
  private cutoff = Infinity;
  private budget = ROUND_BUDGET;
  /** The wants that are commits, peeled once and each once: the only ones ancestry can judge. */
  private readonly starts: string[];
  /** Wants before this index reach what the client has (that only becomes more true). */
  private reached = 0;

  constructor(
    private readonly graph: ObjectGraph,
    wants: readonly string[],
  ) {
    // A want that is not a commit cannot be judged by ancestry: git does not wait for it either.
    const starts = new Set<string>();
    for (const want of new Set(wants)) {
      const start = graph.peel(want);
      if (graph.commit(start)) starts.add(start);
    }
    this.starts = [...starts];
  }

  /** A have the repository holds. */
  addCommon(oid: string): void {
    const commit = this.graph.commit(oid);
    if (!commit) return;
    this.theyHave.add(oid);
    for (const p of commit.parents) this.theyHave.add(p);
    this.cutoff = Math.min(this.cutoff, commit.time);
  }

  ready(): boolean {
    const { graph, theyHave, cutoff, starts } = this;
    if (theyHave.size === 0) return false;
    const allowed = Math.min(READY_BUDGET, this.budget);
    let read = 0;
    try {
      for (; this.reached < starts.length; this.reached++) {
        const start = starts[this.reached]!;
        const stack = [start];
        const seen = new Set<string>(stack);
        let found = false;
        while (stack.length) {
          const oid = stack.pop()!;
          if (theyHave.has(oid)) {
            found = true;
            break;
          }
          if (++read > allowed) return false;
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
    } finally {
      this.budget -= read;
    }
  }
}
