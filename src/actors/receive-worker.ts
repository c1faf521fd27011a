/**
 * Piscina worker entry of the receive pool (receive-pool.ts): reads git pushes into the data
 * directory's LMDB environment. It stores only pending objects (a large pack's early batches);
 * what a push changes is applied by the repository's actor.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { isServiceError, ServiceError } from '../errors.js';
import { advertiseReceivePack, receivePack } from '../git/receive-pack.js';
import { log } from '../log.js';
import { openStorage } from '../storage/database.js';
import { serverStorage } from '../storage/server-storage.js';
import { allowanceRequester } from './allowance-port.js';
import { portSource } from './port-source.js';
import type { ReceiveTask, ReceiveTaskResult } from './receive-pool.js';

const storage = serverStorage(openStorage((workerData as { dataDir: string }).dataDir));

export default async function handle(task: ReceiveTask & { port?: MessagePort; quotaPort?: MessagePort }): Promise<ReceiveTaskResult> {
  // lmdb-js renews a thread's read snapshot on a timer: a push must see the writes acknowledged before it.
  storage.root.resetReadTxn();
  try {
    if (task.kind === 'advertise') {
      return { advertisement: advertiseReceivePack(storage, task.repoId) };
    }
    const refill = task.quotaPort ? allowanceRequester(task.quotaPort) : null;
    try {
      return { outcome: await receivePack(storage, task.request, portSource(task.port!), refill) };
    } finally {
      task.quotaPort?.close();
    }
  } catch (err) {
    if (isServiceError(err)) return { error: err.toJSON() };
    log.error('push failed', { err });
    return { error: new ServiceError('INTERNAL_ERROR', 'internal error').toJSON() };
  }
}
