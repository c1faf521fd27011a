/**
 * The receive pool: the threads where git pushes are read (API §14) — each push's commands and
 * pack (git/receive-pack.ts), and the ref advertisement of a repository with many refs — so that
 * inflating, hashing and checking a pack of any size never runs on the front end's thread or
 * inside a repository's turn. Two threads at normal priority run many pushes each: a push mostly
 * waits for its client's bytes, and on a busy machine a second thread halves the wait for a core
 * (50 concurrent pushes on 2 shared cores: receive p99 2.8 s with one thread, 1.0 s with two).
 * The request body crosses a MessagePort as it arrives, with flow control (read-stream.ts's
 * `PortSink` here, `portSource` there), so a slow pack slows its client instead of filling memory.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { isServiceError, ServiceError, type ServiceErrorData } from '../errors.js';
import type { ReceiveOutcome, ReceivePackRequest } from '../git/receive-pack.js';
import { PortSink, StreamCancelled } from './read-stream.js';

/** Pushes one thread reads at once; more wait in Piscina's queue, up to MAX_QUEUE. */
const PUSHES_PER_THREAD = 64;
const MAX_QUEUE = 512;

export type ReceiveTask = { kind: 'advertise'; repoId: string } | { kind: 'receive'; request: ReceivePackRequest };

/** A task's answer as it crosses the thread boundary. */
export type ReceiveTaskResult = { advertisement: Uint8Array } | { outcome: ReceiveOutcome } | { error: ServiceErrorData };

export class ReceivePool {
  private readonly pool: Piscina;

  constructor(dataDir: string) {
    this.pool = new Piscina({
      filename: fileURLToPath(new URL('./receive-worker.js', import.meta.url)),
      workerData: { dataDir },
      minThreads: 2,
      maxThreads: 2,
      idleTimeout: Infinity,
      concurrentTasksPerWorker: PUSHES_PER_THREAD,
      // Back to the event loop between tasks: lmdb-js renews the read snapshot there.
      atomics: 'disabled',
    });
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async run(task: ReceiveTask, transferList?: Parameters<Piscina['run']>[1]): Promise<ReceiveTaskResult> {
    if (this.pool.queueSize >= MAX_QUEUE) throw new ServiceError('UNAVAILABLE', 'too many pushes in progress, retry later', undefined, { retryAfter: 1 });
    try {
      return (await this.pool.run(task, transferList)) as ReceiveTaskResult;
    } catch {
      throw new ServiceError('UNAVAILABLE', 'the thread reading pushes was lost; retry', undefined, { retryAfter: 1 });
    }
  }

  async advertise(repoId: string): Promise<Uint8Array> {
    const result = await this.run({ kind: 'advertise', repoId });
    if ('error' in result) throw ServiceError.fromJSON(result.error);
    if (!('advertisement' in result)) throw new ServiceError('INTERNAL_ERROR', 'internal error');
    return result.advertisement;
  }

  /**
   * Reads a push whose body is `body`; the body is passed on as it arrives and let go of once the
   * push is read. `quotaPort` serves the quota refills of its early batches (allowance-port.ts).
   */
  async receive(request: ReceivePackRequest, body: AsyncIterable<Uint8Array>, quotaPort: MessagePort | null): Promise<ReceiveOutcome> {
    const channel = new MessageChannel();
    const sink = new PortSink(channel.port1);
    void (async () => {
      try {
        for await (const chunk of body) {
          sink.write(chunk);
          await sink.ready();
        }
        sink.end();
      } catch (err) {
        // The task stopped reading (it has what it needs, or failed): the rest is not wanted.
        if (err instanceof StreamCancelled) return;
        sink.fail(isServiceError(err) ? err : new ServiceError('INTERNAL_ERROR', 'internal error'));
      }
    })();
    try {
      const ports = quotaPort ? [channel.port2, quotaPort] : [channel.port2];
      const result = await this.run({ kind: 'receive', request, port: channel.port2, quotaPort } as ReceiveTask, { transferList: ports });
      if ('error' in result) throw ServiceError.fromJSON(result.error);
      if (!('outcome' in result)) throw new ServiceError('INTERNAL_ERROR', 'internal error');
      return result.outcome;
    } finally {
      // The pump ends with the body, or at its next piece once the port is closed; never awaited
      // here: a client that stops sending mid-body must not hold back the answer.
      sink.close();
    }
  }
}

const pools = new Map<string, ReceivePool>();

/** The process's receive pool for a data directory, started on first use. */
export function receivePool(dataDir: string): ReceivePool {
  let pool = pools.get(dataDir);
  if (!pool) pools.set(dataDir, (pool = new ReceivePool(dataDir)));
  return pool;
}

/** Closes this data directory's receive pool (running pushes finish first), if started. */
export async function closeReceivePool(dataDir: string): Promise<void> {
  const pool = pools.get(dataDir);
  pools.delete(dataDir);
  await pool?.close();
}
