/** Upstream pulls for the scenarios that need a repository's history in repohost (sync, git-clone). */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiClient } from './api-client.js';

export interface SyncOutcome {
  status: string;
  error: unknown;
}

/** Polls a sync until it completes or fails, or `timeoutMs` passes (then its last status). */
export async function waitForSync(api: ApiClient, repo: string, syncId: string, timeoutMs: number): Promise<SyncOutcome> {
  const started = Date.now();
  let outcome: SyncOutcome = { status: 'queued', error: null };
  while (Date.now() - started < timeoutMs) {
    const got = await api.call<{ status?: string; error?: unknown }>('GET', api.repoPath(repo, `/upstream/syncs/${syncId}`));
    if (got.status === 200 && typeof got.body === 'object' && got.body) {
      outcome = { status: got.body.status ?? outcome.status, error: got.body.error ?? null };
      if (outcome.status === 'completed' || outcome.status === 'failed') break;
    }
    await sleep(100);
  }
  return outcome;
}
