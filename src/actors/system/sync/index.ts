/**
 * Starts the upstream sync actor: its scheduler on the main thread and one worker thread for the
 * git network I/O (several syncs interleave on it; `REPOHOST_SYNC_CONCURRENCY` bounds them).
 * Routes call `wakeSyncActor()` after enqueueing so that a new sync starts without waiting for
 * the scheduler's poll.
 */
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { Gauge } from 'prom-client';
import type { Services } from '../../../http/services.js';
import type { SystemActor } from '../index.js';
import { SyncScheduler } from './scheduler.js';
import type { SyncWorkerData } from './sync-worker.js';

/** A connection to an upstream that stays silent this long is abandoned (a transient failure). */
const IDLE_TIMEOUT_MS = 60_000;
/** On shutdown, running tries get this long to finish before they are left for the next start. */
const STOP_GRACE_MS = 5_000;

let active: SyncScheduler | null = null;

export function wakeSyncActor(): void {
  active?.wake();
}

export function startSyncActor(services: Services): SystemActor {
  const { config } = services;
  const workerData: SyncWorkerData = {
    dataDir: config.dataDir,
    allowPrivateUpstreams: config.allowPrivateUpstreams,
    orgQuotaBytes: config.orgQuotaBytes,
    minFreeBytes: config.minFreeBytes,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    logLevel: config.logLevel,
  };
  const pool = new Piscina({
    filename: fileURLToPath(new URL('./sync-worker.js', import.meta.url)),
    // Started by the first sync, not at start-up: a server that never syncs never loads it.
    minThreads: 0,
    maxThreads: 1,
    concurrentTasksPerWorker: config.syncConcurrency,
    idleTimeout: Infinity,
    // Back to its event loop between tasks, where lmdb-js ends its read snapshot: waiting on
    // Atomics, an idle worker kept the last sync's snapshot, and every write after it took new
    // pages instead of reusing freed ones.
    atomics: 'disabled',
    workerData,
  });
  // A failed worker fails its running tries (handled by the scheduler); Piscina replaces it.
  pool.on('error', () => undefined);
  const scheduler = new SyncScheduler(services, pool, { concurrency: config.syncConcurrency, retryBaseMs: config.syncRetryBaseMs });
  active = scheduler;
  new Gauge({
    name: 'repohost_sync_queue_length',
    help: 'Upstream syncs queued or running',
    registers: [services.metrics.registry],
    collect() {
      this.set(scheduler.queueLength());
    },
  });
  scheduler.wake();
  return {
    async stop() {
      if (active === scheduler) active = null;
      await scheduler.stop(STOP_GRACE_MS);
    },
  };
}
