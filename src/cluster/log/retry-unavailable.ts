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
