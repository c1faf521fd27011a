import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { Gauge } from 'prom-client';
import { log } from '../../../log.js';
import type { Services } from '../../../http/services.js';
import type { SystemActor } from '../index.js';
import { pendingCount } from '../../../storage/webhook-store.js';
import { directoryLocation } from '../../../cluster/org-directory/open-org-directory.js';
import type { ToWebhookWorker, WebhookWorkerData } from './worker.js';

/**
 * Starts the webhook actor (`dispatcher.ts`) in its own worker thread. Routes call
 * `adoptWebhookDelivery(…)` after a redelivery so that it goes out at once. It drains the shards
 * this node serves (`services.served`: all of them on a single node, the placement's in cluster
 * mode). A worker that dies is restarted: its state is all in LMDB, and it resumes the pending
 * deliveries of the shards owned then.
 */
const POLL_MS = 25;
const CONCURRENCY_PER_TARGET = 32;
const TIMEOUT_MS = 10_000;
const RETENTION_MS = 7 * 24 * 3600 * 1000;
const RESTART_DELAY_MS = 1000;

let active: Worker | null = null;

/** A redelivery the org's actor created: sent at once if this node owns the org's shard. */
export function adoptWebhookDelivery(orgId: string, targetId: string, deliveryId: string): void {
  active?.postMessage({ type: 'adopt', orgId, targetId, deliveryId } satisfies ToWebhookWorker);
}

export function startWebhookActor(services: Services): SystemActor {
  const { config } = services;
  const data: Omit<WebhookWorkerData, 'ownedShards'> = {
    dataDir: config.dataDir,
    logLevel: config.logLevel,
    orgDirectory: directoryLocation(config),
    brand: config.brand,
    allowPrivate: config.allowPrivateWebhooks,
    retryBaseMs: config.webhookRetryBaseMs,
    pollMs: POLL_MS,
    concurrencyPerTarget: CONCURRENCY_PER_TARGET,
    timeoutMs: TIMEOUT_MS,
    retentionMs: RETENTION_MS,
  };
  let stopping = false;
  let restartTimer: NodeJS.Timeout | null = null;
  let exited: Promise<unknown> = Promise.resolve();
  const spawn = (): void => {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: { ...data, ownedShards: [...services.served.ownedShards()] } satisfies WebhookWorkerData });
    active = worker;
    exited = once(worker, 'exit');
    worker.on('error', (err) => log.error('webhook worker failed', { error: err.message }));
    worker.on('exit', (code) => {
      if (active === worker) active = null;
      if (stopping) return;
      log.error('webhook worker exited; restarting', { code });
      restartTimer = setTimeout(spawn, RESTART_DELAY_MS);
    });
  };
  spawn();
  const unsubscribe = services.served.onChange(() => active?.postMessage({ type: 'own', shards: [...services.served.ownedShards()] } satisfies ToWebhookWorker));
  new Gauge({
    name: 'repohost_webhook_backlog',
    help: 'Webhook deliveries pending (queued, in flight or waiting for a retry) on the shards this node owns',
    registers: [services.metrics.registry],
    collect() {
      // The owned shards only: a node's copies of other shards hold their owners' backlogs, and
      // the cluster's backlog is the sum over its nodes.
      this.set(pendingCount(services.storage.meta, services.served.ownedShards()));
    },
  });
  return {
    async stop() {
      stopping = true;
      unsubscribe();
      if (restartTimer) clearTimeout(restartTimer);
      active?.postMessage({ type: 'stop' } satisfies ToWebhookWorker);
      await exited;
    },
  };
}
