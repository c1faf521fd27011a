/**
 * The analytics actor's own thread: diffing history is CPU work that must not stall the front
 * end's event loop nor any repository's mailbox. It opens the data directory's LMDB environment
 * (readers never block writers; it writes only its own records, in its own transactions).
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { log, setLogLevel } from '../../../log.js';
import { openStorage } from '../../../storage/database.js';
import { serverStorage, threadReplication } from '../../../storage/server-storage.js';
import { repoShard } from '../../../storage/shards.js';
import { AnalyticsActor } from './actor.js';
import { AgentTable } from './agent-table.js';
import { AnalyticsEngine } from './engine.js';
import { LmdbAnalyticsSource } from './source.js';

export interface AnalyticsWorkerData {
  dataDir: string;
  agentTable: string;
  intervalMs: number;
  logLevel: string;
}

const data = workerData as AnalyticsWorkerData;
setLogLevel(data.logLevel);
// On Linux the nice value belongs to the thread (NPTL), so this lowers only this thread (and the
// threads it starts): a rebuild then takes the CPU the front end and the repository actors leave
// idle instead of competing with them. Elsewhere it would lower the whole process: skipped.
if (process.platform === 'linux') {
  try {
    setPriority(19);
  } catch (err) {
    log.warn('analytics worker priority not lowered', { error: (err as Error).message });
  }
}
const storage = serverStorage(openStorage(data.dataDir));
const engine = new AnalyticsEngine(storage, new LmdbAnalyticsSource(storage), AgentTable.load(data.agentTable));
const replication = threadReplication;
const actor = new AnalyticsActor(storage, engine, {
  intervalMs: data.intervalMs,
  serves: replication ? (repoId) => replication.serves(repoShard(repoId)) : undefined,
});
actor.start();

export type AnalyticsMessage = { type: 'touched'; repoIds: string[] } | { type: 'scan-all' } | { type: 'stop' };

parentPort!.on('message', (message: AnalyticsMessage) => {
  if (message.type === 'touched') return actor.touched(message.repoIds);
  if (message.type === 'scan-all') return actor.scanAllNext();
  actor
    .stop()
    .then(() => storage.close())
    .catch((err: Error) => log.error('analytics worker stop failed', { error: err.message }))
    .finally(() => parentPort!.close());
});
