/**
 * The webhook actor's own thread: signing, HTTP and the small LMDB transactions of every attempt
 * add up under fan-out load, and none of it may take the front end's event loop. It opens the
 * data directory's LMDB environment and key like the actor workers do.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { log, setLogLevel } from '../../../log.js';
import { openStorage } from '../../../storage/database.js';
import { serverStorage } from '../../../storage/server-storage.js';
import { SecretBox } from '../../../storage/secret-box.js';
import { openOrgDirectory, type DirectoryLocation } from '../../../cluster/org-directory/open-org-directory.js';
import { WebhookDispatcher, type DispatcherOptions } from './dispatcher.js';
import { OwnedShards } from '../shard-ownership.js';

export interface WebhookWorkerData extends Omit<DispatcherOptions, 'storage' | 'directory' | 'secrets' | 'clock' | 'ownership'> {
  dataDir: string;
  logLevel: string;
  /** The shards this node owns when the worker starts. */
  ownedShards: number[];
  orgDirectory: DirectoryLocation | null;
}

export type ToWebhookWorker =
  /** A redelivery the org's actor created (on the org's shard). */
  | { type: 'adopt'; orgId: string; targetId: string; deliveryId: string }
  /** The shards this node owns from now on. */
  | { type: 'own'; shards: number[] }
  | { type: 'stop' };

const { dataDir, logLevel, ownedShards, orgDirectory, ...options } = workerData as WebhookWorkerData;
setLogLevel(logLevel);
const storage = serverStorage(openStorage(dataDir));
const ownership = new OwnedShards(ownedShards);
const opened = await openOrgDirectory(storage, orgDirectory);
const dispatcher = new WebhookDispatcher({ ...options, storage, directory: opened.directory, secrets: SecretBox.forDataDir(dataDir), ownership });
dispatcher.start();

parentPort!.on('message', (message: ToWebhookWorker) => {
  if (message.type === 'adopt') return dispatcher.adopt(message.orgId, message.targetId, message.deliveryId);
  if (message.type === 'own') return ownership.set(message.shards);
  dispatcher
    .stop()
    .then(() => opened.close())
    .then(() => storage.close())
    .catch((err: Error) => log.error('webhook worker stop failed', { error: err.message }))
    .finally(() => parentPort!.close());
});
