/**
 * Quota refills for the threads that store packs (pushes in the receive pool, pulls in the sync
 * worker): they write outside any actor's batch and can wait, but only the main thread can call
 * the actors a refill goes through (quota-refill.ts). A MessagePort carries each request there
 * and its answer back: the bytes the org still lacked, 0 once the shard has them.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { ActorCaller } from './actor-caller.js';
import { refillAllowance } from './quota-refill.js';

interface RefillRequest {
  id: number;
  need: number;
}

interface RefillAnswer {
  id: number;
  short: number;
}

/** Asks the main thread for `need` more bytes on the pack's shard; resolves to what the org lacked. */
export type Refill = (need: number) => Promise<number>;

/** The main thread's end: serves refills for one repository until `close`; `port` goes to the thread. */
export function serveAllowance(runtime: ActorCaller, orgId: string, repoId: string, traceId: string): { port: MessagePort; close(): void } {
  const channel = new MessageChannel();
  channel.port1.on('message', (req: RefillRequest) => {
    refillAllowance(runtime, orgId, repoId, req.need, traceId).then(
      (short) => channel.port1.postMessage({ id: req.id, short } satisfies RefillAnswer),
      // A refill that could not be made (a worker restarting) leaves the write refused.
      () => channel.port1.postMessage({ id: req.id, short: req.need } satisfies RefillAnswer),
    );
  });
  return { port: channel.port2, close: () => channel.port1.close() };
}

/** The storing thread's end. */
export function allowanceRequester(port: MessagePort): Refill {
  let next = 0;
  const waiting = new Map<number, (short: number) => void>();
  port.on('message', (answer: RefillAnswer) => {
    waiting.get(answer.id)?.(answer.short);
    waiting.delete(answer.id);
  });
  // A closed port answers nothing more: whatever waits is refused.
  port.on('close', () => {
    for (const resolve of waiting.values()) resolve(Number.POSITIVE_INFINITY);
    waiting.clear();
  });
  // The port waits for answers only while a request is out.
  port.unref();
  return (need) =>
    new Promise((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      port.ref();
      port.postMessage({ id, need } satisfies RefillRequest);
    }).finally(() => {
      if (waiting.size === 0) port.unref();
    }) as Promise<number>;
}
