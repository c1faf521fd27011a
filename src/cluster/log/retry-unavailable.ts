import { setTimeout as sleep } from 'node:timers/promises';
import { ShardLogUnavailable } from '../shard-log.js';

/**
 * Runs `attempt` again while it fails with `ShardLogUnavailable` (nothing was written, so a retry
 * is safe), backing off from 50 to 500 ms, until `budgetMs` has passed; then the last error stands.
 */
export async function retryUnavailable<T>(budgetMs: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let wait = 50; ; wait = Math.min(wait * 2, 500)) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof ShardLogUnavailable) || Date.now() + wait > deadline) throw err;
      await sleep(wait);
    }
  }
}

/** Between two rounds of `untilAvailable`. */
const TAIL_RETRY_PAUSE_MS = 500;

/**
 * For a tail, which outlives a member's loss (an election can outlast the budget on a loaded
 * machine): runs `attempt`, itself retried for a budget, again while it fails with
 * `ShardLogUnavailable` and the tail is `wanted`; null once it is not.
 */
export async function untilAvailable<T>(wanted: () => boolean, attempt: () => Promise<T>): Promise<T | null> {
  while (wanted()) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof ShardLogUnavailable)) throw err;
      await sleep(TAIL_RETRY_PAUSE_MS);
    }
  }
  return null;
}
