import type { Services } from '../../http/services.js';
import { startSyncActor } from './sync/index.js';
import { startAnalytics } from './analytics/index.js';
import { startWebhookActor } from './webhooks/index.js';
import { startBlobCollector } from './blob-collector.js';
import { startRepoSagaSweeper } from './repo-saga-sweeper.js';

/**
 * The system actors that run beside the repository actors (upstream sync, webhook fan-out,
 * analytics, the blob collector, the repository saga sweeper). Each is started here and stopped
 * on shutdown.
 */
export interface SystemActor {
  stop(): Promise<void>;
}

export interface SystemActors {
  stop(): Promise<void>;
}

type Starter = (services: Services) => SystemActor;
const starters: Starter[] = [startAnalytics, startSyncActor, startWebhookActor, startBlobCollector, startRepoSagaSweeper];

export function startSystemActors(services: Services): SystemActors {
  const running = starters.map((start) => start(services));
  return {
    async stop() {
      await Promise.all(running.map((a) => a.stop()));
    },
  };
}
