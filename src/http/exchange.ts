import type { HttpRequest, HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RequestState } from './request-state.js';
import { wireBytes } from './wire-bytes.js';

/** A client's own `X-Request-Id`, kept when it looks like an id. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/** A counter's range: small integers, which V8 formats fast, all of 8 hex digits (never padded). */
const FIRST_COUNT = 0x10000000;
const LAST_COUNT = 0x7fffffff;

/** Ids of a random prefix and a counter; a new prefix when the counter's range is used up. */
function idSequence(newPrefix: () => string): () => string {
  let prefix = newPrefix();
  let count = FIRST_COUNT;
  return () => {
    if (count === LAST_COUNT) {
      prefix = newPrefix();
      count = FIRST_COUNT;
    }
    return prefix + (count++).toString(16);
  };
}

/**
 * Trace ids: 32 hex digits, 24 random and 8 of a counter — unique, and cheap enough to make for
 * every request although only 5xx answers and logs show them.
 */
export const nextTraceId = idSequence(() => randomBytes(12).toString('hex'));

/**
 * Request ids where the client sent none: UUID-shaped, 20 random hex digits and 4 more before
 * the counter's 8 — unique like a random UUID, without the random bytes and formatting a
 * `randomUUID` costs on every read.
 */
const nextRequestId = idSequence(() => {
  const hex = randomBytes(12).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 24)}`;
});

/** uWS names methods in lower case; the common ones map to constants, compared by identity later. */
function upperMethod(method: string): string {
  switch (method) {
    case 'get':
      return 'GET';
    case 'post':
      return 'POST';
    case 'patch':
      return 'PATCH';
    case 'delete':
      return 'DELETE';
    default:
      return method.toUpperCase();
  }
}

/**
 * One request on its way through the front end: what uWS gave (read inside its callback, the only
 * time it can be), what the steps found out, and how it is answered.
 */
export class Exchange {
  readonly started = performance.now();
  readonly state = new RequestState();
  readonly url: string;
  readonly method: string;
  readonly requestId: string;
  readonly baseHeaders: Record<string, string>;
  readonly contentLength: string;
  traceId = '';
  /** The matched route's pattern (the metrics label), `unmatched` until then. */
  routeLabel = 'unmatched';
  /** A 401 on a git route names the Basic scheme, so git asks its credential helper (API §14). */
  gitRoute = false;
  private watching = false;

  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
  ) {
    this.url = req.getUrl();
    this.method = upperMethod(req.getMethod());
    const incomingId = req.getHeader(wireBytes('x-request-id'));
    this.requestId = REQUEST_ID.test(incomingId) ? incomingId : nextRequestId();
    this.baseHeaders = { 'X-Request-Id': this.requestId };
    this.contentLength = req.getHeader(wireBytes('content-length'));
  }

  /**
   * uWS needs `onAborted` only for a response that outlives its request callback; a read answered
   * synchronously (the common case) skips it.
   */
  watch(): void {
    if (this.watching) return;
    this.watching = true;
    this.res.onAborted(() => this.state.abort());
  }
}
