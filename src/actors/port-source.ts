/**
 * The reading end of a `PortSink` stream (read-stream.ts) inside a worker: a git push's request
 * body travels from the front end to the receive pool this way. Every piece taken is credited
 * back, so the front end has at most the sink's window of bytes in flight and the client is read
 * no faster than the worker consumes; breaking off the iteration cancels, and the front end stops
 * reading the body.
 */
import type { MessagePort } from 'node:worker_threads';
import { ServiceError } from '../errors.js';
import { readerResult, type ToFrontEnd, type ToTask } from './read-stream.js';

export function portSource(port: MessagePort): AsyncIterable<Uint8Array> {
  const queue: ToFrontEnd[] = [];
  let closed = false;
  let wake: (() => void) | null = null;
  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  port.on('message', (message: ToFrontEnd) => {
    queue.push(message);
    notify();
  });
  port.on('close', () => {
    closed = true;
    notify();
  });
  let lastChunk = 0;
  let done = false;
  const finish = (cancel: boolean): void => {
    if (done) return;
    done = true;
    if (cancel && !closed) port.postMessage({ type: 'cancel' } satisfies ToTask);
    port.close();
  };
  const iterator: AsyncIterator<Uint8Array> = {
    async next() {
      if (done) return { done: true, value: undefined };
      if (lastChunk && !closed) port.postMessage({ type: 'credit', bytes: lastChunk } satisfies ToTask);
      lastChunk = 0;
      for (;;) {
        const message = queue.shift();
        if (message) {
          const result = readerResult(message, () => finish(false));
          if (!result.done) lastChunk = result.value.length;
          return result;
        }
        if (closed) {
          finish(false);
          throw new ServiceError('INVALID_REQUEST', 'the request body ended early');
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    return() {
      finish(true);
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
