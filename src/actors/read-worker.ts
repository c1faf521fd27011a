/**
 * Piscina worker entry of the read pool: opens the data directory's LMDB environment (it only
 * ever reads it) and runs read tasks. Serialized bodies are moved, not copied, to the front end.
 */
import { workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { openStorage } from '../storage/database.js';
import { compileAll } from '../protocol/serializers.js';
import '../protocol/schemas/content.js';
import '../protocol/schemas/diff.js';
import { runReadTask, type ReadTask } from './read-tasks.js';

const storage = openStorage((workerData as { dataDir: string }).dataDir);
compileAll();

/** A body whose buffer it owns alone can be transferred; a pooled small Buffer is copied first. */
function transferable(body: Uint8Array): Uint8Array {
  return body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : new Uint8Array(body);
}

export default function handle(task: ReadTask): unknown {
  const outcome = runReadTask(storage, task);
  return outcome instanceof Uint8Array ? Piscina.move(transferable(outcome)) : outcome;
}
