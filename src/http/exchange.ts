import type { HttpRequest, HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RequestState } from './request-state.js';
import { wireBytes } from './wire-bytes.js';

/** A client's own `X-Request-Id`, kept when it looks like an id. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/**
 * Trace ids: 32 hex digits, a random 18 per process and a counter of 14 that starts at 16^13, so
 * that it always has 14 digits without padding (exact up to 2^53: 2^52 requests) — unique, and
 * cheap enough to make for every request although only 5xx answers and logs show them.
 */
const TRACE_PREFIX = randomBytes(9).toString('hex');
let traceCounter = 2 ** 52;
export const nextTraceId = (): string => TRACE_PREFIX + (++traceCounter).toString(16);

/**
 * Request ids where the client sent none: UUID-shaped, random per process in their first 20 hex
 * digits and a counter in the last 12 (from 16^11, so never padded) — unique like a random UUID,
 * without the random bytes and formatting a `randomUUID` costs on every read.
 */
const REQUEST_ID_PREFIX = ((hex: string) => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-`)(randomBytes(10).toString('hex'));
let requestCounter = 16 ** 11;
const nextRequestId = (): string => REQUEST_ID_PREFIX + (++requestCounter).toString(16);

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
    this.method = req.getMethod().toUpperCase();
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
