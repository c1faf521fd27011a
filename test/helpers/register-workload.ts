import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiCall, HistoryRecorder } from './history-recorder.js';
import type { RegisterValue } from './linearizability.js';

/**
 * A write load on bookmarks for the fault scenarios: `clients` concurrent clients each pick a
 * repository's bookmark `reg` and read it, move it to a fresh change, or move it guarded by the
 * value they last saw, recording everything. Every write's change is new (its own apply-ops), so
 * each register value is written once and a write applied twice or lost shows in the history.
 */

/** The virtual root change (API §5): every repository has it. */
export const ROOT_CHANGE = 'z'.repeat(32);
export const REGISTER_BOOKMARK = 'reg';
/** Reads in flight while checking that acknowledged changes are readable. */
const IN_FLIGHT = 8;

export interface WorkloadOptions {
  org: string;
  repos: string[];
  /** The nodes to send requests through; each request picks one at random. */
  apis: ApiCall[];
  recorder: HistoryRecorder;
  clients: number;
  /** Runs until this resolves (e.g. the scenario's faults are done). */
  until: Promise<unknown>;
  /** Pause between a client's operations, and after a reply that says nothing (ms). */
  pauseMs?: number;
  backoffMs?: number;
}

export interface WorkloadStats {
  operations: number;
  /** Changes acknowledged with 201: each must be readable afterwards. */
  changes: Array<{ repo: string; id: string }>;
  /** Changes that could not be made (the write that needed one was skipped). */
  changeFailures: number;
}

/** Creates each repository's register bookmark at the root change (recorded, through `apis[0]`). */
export async function createRegisters(recorder: HistoryRecorder, api: ApiCall, org: string, repos: string[]): Promise<void> {
  for (const repo of repos) {
    const res = await recorder.create(api, org, repo, REGISTER_BOOKMARK, ROOT_CHANGE, 'setup');
    if (res.outcome !== 'ok') throw new Error(`create ${repo}/${REGISTER_BOOKMARK}: ${res.status} ${res.code ?? ''}`);
  }
}

export async function runRegisterWorkload(o: WorkloadOptions): Promise<WorkloadStats> {
  let done = false;
  void o.until.finally(() => (done = true));
  const stats: WorkloadStats = { operations: 0, changes: [], changeFailures: 0 };
  let serial = 0;
  const client = async (c: number): Promise<void> => {
    const name = `c${c}`;
    const lastSeen = new Map<string, RegisterValue>();
    while (!done) {
      const repo = o.repos[Math.floor(Math.random() * o.repos.length)]!;
      const api = o.apis[Math.floor(Math.random() * o.apis.length)]!;
      const roll = Math.random();
      let settled = true;
      if (roll < 0.4) {
        const r = await o.recorder.read(api, o.org, repo, REGISTER_BOOKMARK, name);
        if (r.outcome === 'ok') lastSeen.set(repo, r.value ?? null);
        settled = r.outcome !== 'info';
      } else {
        const change = await freshChange(api, o.org, repo, `${name}-${serial++}`);
        if (!change) {
          stats.changeFailures++;
          settled = false;
        } else {
          stats.changes.push({ repo, id: change });
          const expected = lastSeen.get(repo);
          const r = roll < 0.7 || !expected ? await o.recorder.move(api, o.org, repo, REGISTER_BOOKMARK, change, name) : await o.recorder.cas(api, o.org, repo, REGISTER_BOOKMARK, expected, change, name);
          if (r.outcome === 'ok') lastSeen.set(repo, change);
          settled = r.outcome !== 'info';
        }
      }
      stats.operations++;
      await sleep(settled ? (o.pauseMs ?? 5) : (o.backoffMs ?? 100));
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)));
  return stats;
}

/** A new change on the root with content unique to `tag`, or null when the request did not succeed. */
async function freshChange(api: ApiCall, org: string, repo: string, tag: string): Promise<string | null> {
  try {
    const res = await api('POST', `/${org}/${repo}/apply-ops`, {
      body: { base_change_id: ROOT_CHANGE, message: tag, ops: [{ op: 'write', path: 'register.txt', content: `${tag}\n` }] },
      signal: AbortSignal.timeout(5000),
    });
    return res.status === 201 ? (res.json.change.id as string) : null;
  } catch {
    return null;
  }
}

/**
 * Reads every acknowledged change back through `api` (retrying unavailability for up to
 * `patienceMs`); returns the ones that are missing or could not be read.
 */
export async function missingChanges(api: ApiCall, org: string, changes: WorkloadStats['changes'], patienceMs = 10_000): Promise<string[]> {
  const missing: string[] = [];
  const deadline = performance.now() + patienceMs;
  const check = async (c: WorkloadStats['changes'][number]): Promise<void> => {
    for (;;) {
      const res = await api('GET', `/${org}/${c.repo}/changes/${c.id}`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
      if (res?.status === 200) return;
      if ((res === null || res.status >= 500) && performance.now() < deadline) {
        await sleep(100);
        continue;
      }
      missing.push(`${c.repo}/${c.id}: ${res?.status ?? 'no reply'}`);
      return;
    }
  };
  // A few reads in flight: one at a time, thousands of changes take seconds per node.
  let next = 0;
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next < changes.length) await check(changes[next++]!);
  }));
  return missing.sort();
}
