import type { HttpRequest, HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RequestState } from './request-state.js';
import { wireBytes } from './wire-bytes.js';

/** A client's own `X-Request-Id`, kept when it looks like an id. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;

/** The serial's range: small integers, which V8 formats fast, all of 8 hex digits (never padded). */
const FIRST_SERIAL = 0x10000000;
const LAST_SERIAL = 0x7fffffff;

/**
 * A request's trace id (32 hex digits: 24 random, then the serial) and, where the client sent
 * none, its request id (UUID-shaped: 24 random hex digits, then the serial) share one serial
 * formatted once — unique like random ids, without random bytes per request. New random prefixes
 * are drawn when the serials are used up.
 */
let serial = LAST_SERIAL;
let tracePrefix = '';
let requestPrefix = '';

function nextSerial(): string {
  if (serial === LAST_SERIAL) {
    const hex = randomBytes(24).toString('hex');
    tracePrefix = hex.slice(0, 24);
    requestPrefix = `${hex.slice(24, 32)}-${hex.slice(32, 36)}-${hex.slice(36, 40)}-${hex.slice(40, 44)}-${hex.slice(44, 48)}`;
    serial = FIRST_SERIAL;
  }
  return (serial++).toString(16);
}

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
  readonly traceId: string;
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
    const serial = nextSerial();
    this.traceId = tracePrefix + serial;
    this.requestId = REQUEST_ID.test(incomingId) ? incomingId : requestPrefix + serial;
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
