/**
 * Starts the analytics actor in its own worker thread. The agent table is loaded here first so a
 * broken `REPOHOST_AGENT_TABLE` file stops the server at start-up with the reason, instead of
 * leaving analytics silently dead. A worker that dies is restarted (its work is idempotent).
 * The repositories whose actors settled calls are handed to it every turn (`RepoActivity`).
 */
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { log } from '../../../log.js';
import type { Services } from '../../../http/services.js';
import type { SystemActor } from '../index.js';
import { AgentTable } from './agent-table.js';
import type { AnalyticsMessage, AnalyticsWorkerData } from './worker.js';

export const SCAN_INTERVAL_MS = 500;
const RESTART_DELAY_MS = 1000;

export function startAnalytics(services: Services): SystemActor {
  AgentTable.load(services.config.agentTable);
  const data: AnalyticsWorkerData = {
    dataDir: services.config.dataDir,
    agentTable: services.config.agentTable,
    intervalMs: SCAN_INTERVAL_MS,
    logLevel: services.config.logLevel,
  };
  let stopping = false;
  let restartTimer: NodeJS.Timeout | null = null;
  let worker: Worker;
  let exited: Promise<unknown>;
  const spawn = (): void => {
    worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: data });
    exited = once(worker, 'exit');
    worker.on('error', (err) => log.error('analytics worker failed', { error: err.message }));
    worker.on('exit', (code) => {
      if (stopping) return;
      log.error('analytics worker exited; restarting', { code });
      restartTimer = setTimeout(spawn, RESTART_DELAY_MS);
    });
  };
  spawn();
  const post = (message: AnalyticsMessage): void => worker.postMessage(message);
  // A worker started again scans every record first: what it was handed before is not lost.
  const handOver = setInterval(() => {
    const touched = services.activity.take();
    if (touched === 'all') post({ type: 'scan-all' });
    else if (touched.length > 0) post({ type: 'touched', repoIds: touched });
  }, SCAN_INTERVAL_MS / 2);
  return {
    async stop() {
      stopping = true;
      clearInterval(handOver);
      if (restartTimer) clearTimeout(restartTimer);
      post({ type: 'stop' });
      await exited;
    },
  };
}
