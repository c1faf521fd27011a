/**
 * Piscina worker entry of the read and pack pools: opens the data directory's LMDB environment (it
 * only ever reads it) and runs read tasks. Serialized bodies are moved, not copied, to the front end.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { openStorage } from '../storage/database.js';
import { compileResponses } from '../protocol/serializers.js';
import { runReadTask, runStreamTask, type ReadTask, type StreamTask } from './read-tasks.js';
import { lowerThreadPriority } from './thread-priority.js';
import { attachWriterActivity } from './writer-activity.js';

/** What a pool hands its threads (read-pool.ts). */
export interface ReadWorkerData {
  dataDir: string;
  nice: number;
  writerActivity: SharedArrayBuffer;
}

const data = workerData as ReadWorkerData;
const storage = openStorage(data.dataDir);
compileResponses(['contentFile', 'contentDir', 'diff']);

lowerThreadPriority(data.nice);
attachWriterActivity(data.writerActivity);

/** A body whose buffer it owns alone can be transferred; a pooled small Buffer is copied first. */
function transferable(body: Uint8Array): Uint8Array {
  return body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : new Uint8Array(body);
}

export default function handle(task: ReadTask | (StreamTask & { port: MessagePort })): unknown {
  // lmdb-js renews a thread's snapshot on a timer after first use; a task that comes sooner may
  // follow a write acknowledged since, which it must see.
  storage.root.resetReadTxn();
  if (task.kind === 'upload-pack') return runStreamTask(storage, task, task.port);
  const outcome = runReadTask(storage, task);
  return outcome instanceof Uint8Array ? Piscina.move(transferable(outcome)) : outcome;
}
