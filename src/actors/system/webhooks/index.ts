import { Gauge } from 'prom-client';
import type { Services } from '../../../http/services.js';
import type { SystemActor } from '../index.js';
import { WebhookDispatcher } from './dispatcher.js';

/**
 * Starts the webhook actor on the main thread (see `dispatcher.ts`). Routes call
 * `adoptWebhookDelivery(…)` after a redelivery so that it goes out without waiting for a restart.
 */
const POLL_MS = 25;
const CONCURRENCY_PER_TARGET = 8;
const TIMEOUT_MS = 10_000;
const RETENTION_MS = 7 * 24 * 3600 * 1000;

let active: WebhookDispatcher | null = null;

export function adoptWebhookDelivery(orgId: string, targetId: string, deliveryId: string): void {
  active?.adopt(orgId, targetId, deliveryId);
}

export function startWebhookActor(services: Services): SystemActor {
  const { config } = services;
  const dispatcher = new WebhookDispatcher({
    storage: services.storage,
    secrets: services.secrets,
    brand: config.brand,
    allowPrivate: config.allowPrivateWebhooks,
    retryBaseMs: config.webhookRetryBaseMs,
    pollMs: POLL_MS,
    concurrencyPerTarget: CONCURRENCY_PER_TARGET,
    timeoutMs: TIMEOUT_MS,
    retentionMs: RETENTION_MS,
  });
  active = dispatcher;
  new Gauge({
    name: 'repohost_webhook_backlog',
    help: 'Webhook deliveries pending (queued, in flight or waiting for a retry)',
    registers: [services.metrics.registry],
    collect() {
      this.set(dispatcher.backlog());
    },
  });
  dispatcher.start();
  return {
    async stop() {
      if (active === dispatcher) active = null;
      await dispatcher.stop();
    },
  };
}
