/**
 * The read pools: a few worker threads, separate from the repository actors, for reads that cost
 * CPU, so one large diff never stalls the front end's event loop or a repository's mailbox. The
 * read pool runs the API's heavy reads (diffs, materializing conflicts, large content JSON, deep
 * listings); the pack pool runs git's upload-pack, whose clones are bulk work a client does not
 * expect to be instant, on threads of the lowest priority (thread-priority.ts). Any thread can run
 * any read (reads need no affinity), so Piscina's own scheduling is used. The queue is bounded:
 * past it, reads are refused with 503 rather than piling up.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { ServiceError } from '../errors.js';
import type { ShippedView } from '../storage/read/change-view.js';
import { openReadStream } from './read-stream.js';
import type { ReadWorkerData } from './read-worker.js';
import { BACKGROUND_NICE, BULK_NICE } from './thread-priority.js';
import { writerActivityBuffer } from './writer-activity.js';
import { shardOf, slotOf } from './shard-map.js';
import { unwrapOutcome, type ReadOutcome, type ReadTask, type StreamTask } from './read-tasks.js';

/** Read tasks waiting for a thread before new ones are refused. */
const MAX_QUEUE = 512;
/**
 * Tasks one thread runs at once: a streaming task (a git fetch) waits on its client between
 * pieces, and other reads share its thread meanwhile instead of queueing behind a slow download.
 */
export const TASKS_PER_READ_THREAD = 4;

type Balancer = NonNullable<NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer']>;

/** A task's preferred thread, as the balancer reads it from the task. */
interface Affinity {
  affinity: string;
}

function affinityOf(task: Parameters<Balancer>[0]): string | undefined {
  return (task[Piscina.queueOptionsSymbol as keyof typeof task] as Affinity | null | undefined)?.affinity;
}

/**
 * Piscina's least-busy choice, with one preference: a task with an affinity (a git fetch names
 * its repository) goes to that key's thread whenever that thread has at most one task more than
 * the least busy, so a repository's clones find the reachable sets their thread keeps
 * (git/reachable-sets.ts) even while the previous clone's task is still finishing there, and
 * concurrent ones still spread over the threads. A key's thread is placed as an actor's is
 * (shard-map.ts), on the threads ranked by id, once all `threads` are up (until then, none is).
 */
export function balanceReads(threads: number): Balancer {
  return (task, workers) => {
    let best: (typeof workers)[number] | null = null;
    for (const worker of workers) {
      if (worker.isRunningAbortableTask || worker.currentUsage >= TASKS_PER_READ_THREAD) continue;
      if (!best || worker.currentUsage < best.currentUsage) best = worker;
    }
    const affinity = affinityOf(task);
    if (!best || affinity === undefined || workers.length !== threads) return best;
    const preferred = [...workers].sort((a, b) => a.id - b.id)[slotOf(shardOf(affinity), threads)]!;
    const usable = !preferred.isRunningAbortableTask && preferred.currentUsage < TASKS_PER_READ_THREAD;
    return usable && preferred.currentUsage <= best.currentUsage + 1 ? preferred : best;
  };
}

export class ReadPool {
  private readonly pool: Piscina;

  constructor(dataDir: string, threads: number, nice: number) {
    this.pool = new Piscina({
      filename: fileURLToPath(new URL('./read-worker.js', import.meta.url)),
      workerData: { dataDir, nice, writerActivity: writerActivityBuffer() } satisfies ReadWorkerData,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Infinity,
      concurrentTasksPerWorker: TASKS_PER_READ_THREAD,
      loadBalancer: balanceReads(threads),
      // Workers must return to their event loop between tasks: lmdb-js renews its read
      // snapshot there, and with Atomics waiting a worker would keep reading an old one.
      atomics: 'disabled',
    });
  }

  async run(task: ReadTask): Promise<Uint8Array | ShippedView> {
    if (this.pool.queueSize >= MAX_QUEUE) throw new ServiceError('UNAVAILABLE', 'too many reads in progress, retry later', undefined, { retryAfter: 1 });
    return unwrapOutcome((await this.pool.run(task)) as ReadOutcome);
  }

  /** Runs a task that streams its answer (read-stream.ts); resolves once its first bytes arrive. */
  stream(task: StreamTask): Promise<AsyncIterable<Uint8Array>> {
    if (this.pool.queueSize >= MAX_QUEUE) throw new ServiceError('UNAVAILABLE', 'too many reads in progress, retry later', undefined, { retryAfter: 1 });
    const affinity: Affinity = { affinity: task.request.repoId };
    return openReadStream((port) => this.pool.run({ ...task, port, [Piscina.queueOptionsSymbol]: affinity }, { transferList: [port] }));
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** Half the cores (at least 2, at most 4), per pool: reads must leave room for the front end and actors. */
export const READ_THREADS = Math.min(4, Math.max(2, Math.floor(availableParallelism() / 2)));

type PoolKind = 'read' | 'pack';
const pools = new Map<string, ReadPool>();
const poolKey = (kind: PoolKind, dataDir: string): string => `${kind}:${dataDir}`;

function poolFor(kind: PoolKind, dataDir: string, nice: number): ReadPool {
  const key = poolKey(kind, dataDir);
  let pool = pools.get(key);
  if (!pool) pools.set(key, (pool = new ReadPool(dataDir, READ_THREADS, nice)));
  return pool;
}

/** The process's read pool for a data directory (the API's heavy reads), started on first use. */
export function readPool(dataDir: string): ReadPool {
  return poolFor('read', dataDir, BACKGROUND_NICE);
}

/** The process's pack pool for a data directory (git's upload-pack), started on first use. */
export function packPool(dataDir: string): ReadPool {
  return poolFor('pack', dataDir, BULK_NICE);
}

/** Closes this data directory's read and pack pools (running tasks finish first), if started. */
export async function closeReadPools(dataDir: string): Promise<void> {
  const started = (['read', 'pack'] as const).flatMap((kind) => {
    const key = poolKey(kind, dataDir);
    const pool = pools.get(key);
    pools.delete(key);
    return pool ? [pool.close()] : [];
  });
  await Promise.all(started);
}
