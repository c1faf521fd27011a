/**
 * Waiting for the analytics actor to catch up with a repository. Moving the default bookmark
 * starts a computation in the background (API §10); a scale point timed while the document of a
 * freshly built 100,000-file fixture is computed would measure that computation too.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiClient } from './api-client.js';

const POLL_MS = 100;

/** Seconds until `GET …/analytics` says `current`, or null when it still did not at `timeoutMs`. */
export async function waitForAnalytics(api: ApiClient, repo: string, timeoutMs: number): Promise<number | null> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const res = await api.call<{ status?: string }>('GET', api.repoPath(repo, '/analytics'));
    if (res.status === 200 && typeof res.body === 'object' && res.body.status === 'current') return (performance.now() - started) / 1000;
    await sleep(POLL_MS);
  }
  return null;
}
