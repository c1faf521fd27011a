import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { ServiceError } from '../errors.js';
import { clientGone, type RequestState } from './request-state.js';

export const DEFAULT_BODY_LIMIT = 1024 * 1024;

export const tooLarge = (limit: number): ServiceError =>
  new ServiceError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`, { limit_bytes: limit });

/**
 * A refused body (413) with at most this many bytes still to come is read to its end and dropped by
 * uWS (it frames the next request by the declared length), so a client that writes its whole body
 * before reading sees the answer instead of a reset. Past it, or with no declared length, the
 * connection is closed after the answer rather than read for nothing.
 */
const DRAINED_EXCESS_BYTES = 8 * 1024 * 1024;

export const closesAfterTooLarge = (limit: number, declaredLength: number): boolean =>
  declaredLength === 0 || declaredLength - limit > DRAINED_EXCESS_BYTES;

/**
 * Collects a request body up to `limit` bytes. The running total is checked on every chunk, so a
 * body over the limit is refused (413) while it streams in, never buffered whole. uWS reuses the
 * chunk's memory after the callback: every chunk is copied. Once the body is complete, reading
 * the connection pauses until the response is written (see `RequestState.pauseReading`).
 */
export function readBody(res: HttpResponse, state: RequestState, limit: number, declaredLength: number): Promise<Buffer> {
  if (declaredLength > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let failed = false;
    state.onAbort(() => reject(clientGone()));
    res.onData((chunk, isLast) => {
      if (failed) return;
      if (state.finished) {
        // Answered before the body ended (a refused token, say): what came is let go, the rest is
        // dropped as it arrives instead of held up to the limit until the connection closes, and
        // nothing waits for the body any more.
        failed = true;
        chunks.length = 0;
        reject(clientGone());
        return;
      }
      total += chunk.byteLength;
      if (total > limit) {
        failed = true;
        reject(tooLarge(limit));
        return;
      }
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (!isLast) return;
      state.pauseReading(res);
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    });
  });
}

/**
 * The body as an async stream with back-pressure: uWS is paused while the consumer lags behind by
 * more than a few chunks, and from the last chunk until the response is written. Exceeding
 * `limit` ends the stream with PAYLOAD_TOO_LARGE.
 */
export function streamBody(res: HttpResponse, state: RequestState, limit: number, declaredLength: number): AsyncIterable<Uint8Array> {
  const queue: Uint8Array[] = [];
  let done = false;
  let error: ServiceError | null = declaredLength > limit ? tooLarge(limit) : null;
  let wake: (() => void) | null = null;
  let total = 0;
  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  state.onAbort(() => {
    error ??= clientGone();
    notify();
  });
  if (!error) {
    res.onData((chunk, isLast) => {
      // Once answered (the handler failed while the body was still arriving), the rest of the
      // body is dropped, and the response, which uWS forbids touching now, is left alone.
      if (error || state.finished) return;
      total += chunk.byteLength;
      if (total > limit) error = tooLarge(limit);
      else queue.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) done = true;
      if (done || queue.length > 16) state.pauseReading(res);
      notify();
    });
  }
  return {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (error) throw error;
        const next = queue.shift();
        if (next) {
          if (queue.length < 4 && !done && !state.finished) state.resumeReading(res);
          yield next;
          continue;
        }
        if (done) return;
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}
