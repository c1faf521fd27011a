/**
 * Streaming a read-pool task's output to the front end (git's upload-pack: a pack can be far
 * larger than memory). The task writes into a `PortSink` on its thread; the bytes cross a
 * MessagePort in pieces of `PIECE_BYTES` (moved, not copied), and the front end reads them as an
 * async iterable. Flow control is by credit: the task may have at most `WINDOW_BYTES` sent and not
 * yet taken by the front end, so a slow client slows the task down instead of filling memory.
 *
 * Messages, task → front end: `{type: 'data', chunk}`, `{type: 'end'}`, `{type: 'error', error}`;
 * front end → task: `{type: 'credit', bytes, piece?}` as it takes pieces, `{type: 'cancel'}` when
 * the client went away. A reader that is done with a piece's memory moves it back with its credit
 * and the sink fills it again: a clone then allocates a window's worth of pieces once instead of
 * a new one per piece, and the front end, which takes many MiB a second of them, is not driven
 * into major collections by the memory it is handed (each one a pause of every request).
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { ServiceError, type ServiceErrorData } from '../errors.js';

const PIECE_BYTES = 256 * 1024;
const WINDOW_BYTES = 1024 * 1024;

/** What a `PortSink` posts; `ToTask` is what its reader answers (the same protocol carries a push's body the other way, port-source.ts). */
export type ToFrontEnd = { type: 'data'; chunk: Uint8Array } | { type: 'end' } | { type: 'error'; error: ServiceErrorData };
export type ToTask = { type: 'credit'; bytes: number; piece?: Uint8Array<ArrayBuffer> } | { type: 'cancel' };

/**
 * A reader's answer to a message of the stream: its chunk, or the end; an error message is
 * thrown as the error it carries. `end` runs before the end is answered or the error thrown.
 */
export function readerResult(message: ToFrontEnd, end: () => void): IteratorResult<Uint8Array, undefined> {
  if (message.type === 'data') return { done: false, value: message.chunk };
  end();
  if (message.type === 'error') throw ServiceError.fromJSON(message.error);
  return { done: true, value: undefined };
}

/** Thrown inside the task once the front end cancelled (the client went away). */
export class StreamCancelled extends Error {
  constructor() {
    super('the client went away');
  }
}

/**
 * The task's end of the stream. `write` copies into the current piece (so callers may pass views
 * that are only valid until their next read) and sends pieces as they fill; `flush` sends a
 * partial one (progress the client should see now); `ready` waits until the front end has room.
 */
export class PortSink {
  private piece = new Uint8Array(PIECE_BYTES);
  private used = 0;
  private inFlight = 0;
  private cancelled = false;
  private wake: (() => void) | null = null;
  /** Pieces the reader moved back, to be filled again. */
  private readonly spare: Uint8Array<ArrayBuffer>[] = [];

  constructor(private readonly port: MessagePort) {
    port.on('message', (message: ToTask) => {
      if (message.type === 'credit') {
        this.inFlight -= message.bytes;
        if (message.piece?.byteLength === PIECE_BYTES) this.spare.push(message.piece);
      } else this.cancelled = true;
      this.notify();
    });
    // The front end closed its end (it stopped reading, or its thread is going away).
    port.on('close', () => {
      this.cancelled = true;
      this.notify();
    });
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  get isCancelled(): boolean {
    return this.cancelled;
  }

  write(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.length) {
      const n = Math.min(PIECE_BYTES - this.used, bytes.length - at);
      this.piece.set(n === bytes.length ? bytes : bytes.subarray(at, at + n), this.used);
      this.used += n;
      at += n;
      if (this.used === PIECE_BYTES) this.flush();
    }
  }

  /** Sends the bytes written so far. */
  flush(): void {
    if (this.used === 0) return;
    // A piece crosses the port by moving its memory: a partial one is copied into its own first.
    const chunk = this.used === PIECE_BYTES ? this.piece : this.piece.slice(0, this.used);
    if (chunk === this.piece) this.piece = this.spare.pop() ?? new Uint8Array(PIECE_BYTES);
    this.inFlight += this.used;
    this.used = 0;
    this.post({ type: 'data', chunk }, [chunk.buffer]);
  }

  /** Resolves once fewer than the window's bytes are sent and unread; throws once cancelled. */
  async ready(): Promise<void> {
    while (!this.cancelled && this.inFlight >= WINDOW_BYTES) await new Promise<void>((r) => (this.wake = r));
    if (this.cancelled) throw new StreamCancelled();
  }

  end(): void {
    this.flush();
    this.post({ type: 'end' });
    this.port.close();
  }

  fail(error: ServiceError): void {
    this.post({ type: 'error', error: error.toJSON() });
    this.port.close();
  }

  /** Closes the port without a word: the front end already stopped listening. */
  close(): void {
    this.port.close();
  }

  private post(message: ToFrontEnd, transfer: ArrayBuffer[] = []): void {
    if (!this.cancelled) this.port.postMessage(message, transfer);
  }
}

/**
 * The front end's end: starts the task with `run`, handing it its port, and resolves with the
 * stream once the first message arrives — rejected instead when the task failed before writing
 * anything, so the request can still be answered with an HTTP error. The task's own failure (a
 * thread lost) ends the stream with an error. Ending the iteration early (`return`, which the
 * responder always calls) cancels the task. A chunk is the reader's only until it asks for the
 * next one, which moves the chunk's memory back to the task (the responder has handed it to uWS,
 * which copies what the socket does not take at once).
 */
export function openReadStream(run: (port: MessagePort) => Promise<unknown>): Promise<AsyncIterable<Uint8Array>> {
  const channel = new MessageChannel();
  const queue: ToFrontEnd[] = [];
  let wake: (() => void) | null = null;
  let failure: ServiceError | null = null;
  let closed = false;
  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  const close = (finished: boolean): void => {
    if (closed) return;
    closed = true;
    if (!finished) channel.port1.postMessage({ type: 'cancel' } satisfies ToTask);
    channel.port1.close();
  };
  channel.port1.on('message', (message: ToFrontEnd) => {
    queue.push(message);
    notify();
  });
  // A task that ends normally has posted its last message already; only a lost thread fails here.
  run(channel.port2).catch((err: unknown) => {
    failure = err instanceof ServiceError ? err : new ServiceError('UNAVAILABLE', 'a read thread was lost', undefined, { retryAfter: 1 });
    notify();
  });
  /** Credits a chunk the reader is done with, moving its memory back when it owns it whole. */
  const creditBack = (chunk: Uint8Array): void => {
    const { buffer } = chunk;
    const whole = buffer instanceof ArrayBuffer && chunk.byteOffset === 0 && chunk.byteLength === buffer.byteLength;
    const credit: ToTask = { type: 'credit', bytes: chunk.byteLength, ...(whole ? { piece: new Uint8Array(buffer) } : {}) };
    channel.port1.postMessage(credit, whole ? [buffer] : []);
  };
  const next = async (): Promise<ToFrontEnd> => {
    for (;;) {
      const message = queue.shift();
      if (message) return message;
      if (failure) {
        // Messages the task posted before it failed come first (they may still be on their way).
        await new Promise((r) => setImmediate(r));
        if (queue.length) continue;
        throw failure;
      }
      await new Promise<void>((r) => (wake = r));
    }
  };

  return (async (): Promise<AsyncIterable<Uint8Array>> => {
    let first: ToFrontEnd;
    try {
      first = await next();
      if (first.type === 'error') throw ServiceError.fromJSON(first.error);
    } catch (err) {
      close(true);
      throw err;
    }
    let pending: ToFrontEnd | null = first;
    let lastChunk: Uint8Array | null = null;
    const iterator: AsyncIterator<Uint8Array> = {
      async next() {
        if (closed) return { done: true, value: undefined };
        if (lastChunk) creditBack(lastChunk);
        lastChunk = null;
        let message: ToFrontEnd;
        try {
          message = pending ?? (await next());
        } catch (err) {
          close(true);
          throw err;
        }
        pending = null;
        const result = readerResult(message, () => close(true));
        if (!result.done) lastChunk = result.value;
        return result;
      },
      return() {
        close(false);
        return Promise.resolve({ done: true, value: undefined });
      },
    };
    return { [Symbol.asyncIterator]: () => iterator };
  })();
}
