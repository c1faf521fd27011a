import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { ServiceError } from '../errors.js';
import { serialize } from '../protocol/serializers.js';
import type { RequestState } from './request-state.js';
import { HeaderBlock, wireBytes } from './wire-bytes.js';

/** A reply's own headers: per response, or a block made once (`HeaderBlock`). */
export type OwnHeaders = Readonly<Record<string, string>> | HeaderBlock;

const CONTENT_TYPE = wireBytes('Content-Type');

/**
 * Writing responses to uWS: corked, once, never after the client aborted. Writing a response
 * resumes reading the connection where it was paused for it (`RequestState.pauseReading`).
 */
const STATUS_LINES = new Map<number, Buffer>();
function statusLine(status: number): Buffer {
  let line = STATUS_LINES.get(status);
  if (!line) STATUS_LINES.set(status, (line = Buffer.from(`${status} ${STATUS_CODES[status] ?? ''}`.trim())));
  return line;
}

/**
 * Resumes reading where it was paused for this response, then writes its status and headers
 * (corked): `own` after `headers`, winning where both name a header — no merged copy per response.
 */
function writeHead(res: HttpResponse, state: RequestState, status: number, headers: Record<string, string>, own?: OwnHeaders): void {
  state.resumeReading(res);
  res.writeStatus(statusLine(status));
  if (own instanceof HeaderBlock) {
    for (const name in headers) if (!own.has(name)) res.writeHeader(wireBytes(name), headers[name]!);
    res.writeHeader(own.name, own.rest);
    return;
  }
  for (const name in headers) if (own?.[name] === undefined) res.writeHeader(wireBytes(name), headers[name]!);
  if (own) for (const name in own) res.writeHeader(wireBytes(name), own[name]!);
}

/** `headers`, then `extra` (winning over `headers`) and `contentType` when given. */
export function send(
  res: HttpResponse,
  state: RequestState,
  status: number,
  headers: Record<string, string>,
  body: string | Uint8Array,
  closeConnection = false,
  contentType: string | null = null,
  extra?: OwnHeaders,
): void {
  if (state.aborted || state.finished) return;
  state.finished = true;
  if (state.inCallback) return writeWhole(res, state, status, headers, body, closeConnection, contentType, extra);
  res.cork(() => writeWhole(res, state, status, headers, body, closeConnection, contentType, extra));
}

function writeWhole(
  res: HttpResponse,
  state: RequestState,
  status: number,
  headers: Record<string, string>,
  body: string | Uint8Array,
  closeConnection: boolean,
  contentType: string | null,
  extra: OwnHeaders | undefined,
): void {
  // Every header before the end: uWS forbids touching a response after it.
  writeHead(res, state, status, headers, extra);
  if (contentType !== null) res.writeHeader(CONTENT_TYPE, wireBytes(contentType));
  res.end(body, closeConnection);
}

export function sendError(res: HttpResponse, state: RequestState, err: ServiceError, headers: Record<string, string>, traceId: string, closeConnection = false, minBodyBytes = 0): void {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.details !== undefined && err.code !== 'METHOD_NOT_ALLOWED') error.details = err.details;
  if (err.status >= 500) error.trace_id = traceId;
  const extra: Record<string, string> = {};
  if (err.retryAfter !== undefined) extra['Retry-After'] = String(err.retryAfter);
  if (err.code === 'METHOD_NOT_ALLOWED') extra['Allow'] = ((err.details?.allow as string[]) ?? []).join(', ');
  send(res, state, err.status, headers, serialize('error', { error }).padEnd(minBodyBytes), closeConnection, 'application/json', extra);
}

/**
 * uWS's cork buffer (`LoopData::CORK_BUFFER_SIZE` of this build). A request callback runs corked;
 * a write that does not fit in the buffer sends it and itself to the socket at once.
 */
const CORK_BUFFER_BYTES = 16 * 1024;

/**
 * Answers from inside the request callback and closes the connection there and then, before uWS
 * parses another byte of it: for a request whose framing cannot be trusted. uWS would otherwise
 * close the connection after the callback and drop the corked response (a Content-Length it
 * cannot parse), or go on to read the body as the next request (several Content-Length fields).
 * The envelope is padded with JSON whitespace past the cork buffer, so it is written at once, and
 * ending it uncorked with `closeConnection` shuts the socket down and closes it.
 */
export function sendErrorAndClose(res: HttpResponse, state: RequestState, err: ServiceError, headers: Record<string, string>, traceId: string): void {
  sendError(res, state, err, headers, traceId, true, CORK_BUFFER_BYTES + 1);
}

/**
 * Streams a body with back-pressure, so a large file moves through a bounded window instead of
 * being copied into one buffer: of known length with uWS's `tryEnd` (Content-Length), of unknown
 * length with `write` (chunked transfer encoding), waiting for `onWritable` whenever uWS holds
 * unsent bytes. The stream is always closed (`return`), also when the client went away first, so
 * its producer stops.
 */
export async function sendStream(
  res: HttpResponse,
  state: RequestState,
  status: number,
  headers: Record<string, string>,
  chunks: AsyncIterable<Uint8Array>,
  length: number | null,
  own?: Record<string, string>,
): Promise<void> {
  const iterator = chunks[Symbol.asyncIterator]();
  try {
    if (state.aborted || state.finished) return;
    state.finished = true;
    res.cork(() => {
      // A paused socket gets no writable events either, which the stream below needs. A pipelined
      // request read meanwhile makes uWS close the connection: only a read is lost then.
      writeHead(res, state, status, headers, own);
    });
    if (length === 0) {
      res.cork(() => res.end());
      return;
    }
    // One writable handler for the whole response, which only wakes the loop below: a handler
    // replaced while a write is pending is not reliably called again by uWS (the stream stalls).
    let wake: (() => void) | null = null;
    const notify = (): void => {
      const w = wake;
      wake = null;
      w?.();
    };
    res.onWritable(() => {
      notify();
      return true;
    });
    state.onAbort(notify);
    // A client that stops reading is closed by uWS (a write left pending arms its 10 s timeout),
    // which aborts the response: this wait always ends.
    const writable = (): Promise<void> => new Promise<void>((resolve) => (wake = resolve));
    let sent = false;
    for (;;) {
      const next = await iterator.next();
      if (state.aborted) return;
      if (next.done) {
        if (length === null) res.cork(() => res.end());
        return;
      }
      // Read on to the source's own end after the last byte: a stream left before its end is
      // destroyed with an AbortError whose stack trace (5 % of a forwarding node's CPU) nobody reads.
      if (sent) return;
      const chunk = next.value;
      if (length === null) {
        let ok = true;
        res.cork(() => (ok = res.write(chunk)));
        // uWS keeps what the socket did not take; wait until it is sent before producing more.
        if (!ok) await writable();
        continue;
      }
      const start = res.getWriteOffset();
      for (;;) {
        if (state.aborted) return;
        let result: [boolean, boolean] = [false, false];
        res.cork(() => (result = res.tryEnd(chunk.subarray(res.getWriteOffset() - start), length)));
        const [ok, done] = result;
        sent = done;
        if (ok || done) break;
        await writable();
      }
    }
  } finally {
    await iterator.return?.();
  }
}
