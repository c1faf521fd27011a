/**
 * The HTTP client of the git transport, on node:http. It enforces the outbound address policy at
 * connection time, against the address actually dialled (so a DNS answer that changed since the
 * URL was saved cannot reach a forbidden host), bounds every request with an idle timeout, never
 * follows redirects (a redirect could carry the credentials to another host), and cuts every
 * response body off at the caller's cap.
 *
 * Connections are kept alive between requests. A kept connection can be dead without us knowing
 * (the upstream, or something on the way, dropped it while it was idle): the request then fails
 * with a reset before any byte of an answer. Exactly that case is tried once more on a new
 * connection; the git requests are safe to repeat (a fetch reads, a push's ref updates name the
 * old value, so a repeated one cannot apply twice).
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { classifyAddress } from '../../../net/address-policy.js';
import { SyncFailure } from './sync-errors.js';

export interface GitHttpRequest {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: Buffer;
  /** The response body may be at most this long. */
  maxBytes: number;
  /** What the response is, for the message when it is too long ("ref advertisement"). */
  what: string;
}

export interface GitHttpResponse {
  status: number;
  /** The media type of `Content-Type`, lower-case, without parameters. */
  contentType: string;
  /** The body, failing once it passes the request's `maxBytes`. */
  body: AsyncIterable<Uint8Array>;
  /** Done with the response: the connection is dropped unless the body was read to its end. */
  close(): void;
}

export interface GitHttpClient {
  request(req: GitHttpRequest): Promise<GitHttpResponse>;
}

export interface GitHttpOptions {
  allowPrivate: boolean;
  /** A connection that sends nothing for this long is abandoned (a transient failure). */
  idleTimeoutMs: number;
  userAgent: string;
}

/** What is left of a response after its reader is done: read and dropped up to this, then cut. */
const DRAIN_BYTES = 64 * 1024;
const DRAIN_MS = 1000;

/** How a dead kept-alive connection shows when a request is written to it. */
const STALE_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE']);

function policyError(address: string, allowPrivate: boolean): SyncFailure | null {
  const verdict = classifyAddress(address);
  if (verdict === 'forbidden') return new SyncFailure('the upstream url resolves to a link-local or metadata address, which is never allowed', false);
  if (verdict === 'private' && !allowPrivate) {
    return new SyncFailure('the upstream url resolves to a private or loopback address, which this server does not allow', false);
  }
  return null;
}

function checkedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 4);
      for (const a of addresses) {
        const refused = policyError(a.address, allowPrivate);
        if (refused) return callback(refused, '', 4);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

const tooLong = (req: GitHttpRequest): SyncFailure => new SyncFailure(`the upstream's ${req.what} is larger than the limit of ${req.maxBytes} bytes`, false);

/** The body as a stream that fails past `maxBytes`. Leaving it early leaves the response as is. */
async function* cappedBody(res: IncomingMessage, req: GitHttpRequest): AsyncGenerator<Uint8Array> {
  let total = 0;
  for await (const chunk of res.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > req.maxBytes) {
      res.destroy();
      throw tooLong(req);
    }
    yield chunk;
  }
}

/**
 * Lets go of a response. The protocol often ends before the HTTP body does (a flush packet, then
 * the end of the chunked encoding): what is left is read and dropped, so the connection can serve
 * the next request, unless it is more than a few packets or does not come at once.
 */
function release(res: IncomingMessage): void {
  if (res.destroyed || res.readableEnded) return;
  let left = DRAIN_BYTES;
  const timer = setTimeout(() => res.destroy(), DRAIN_MS);
  res.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) res.destroy();
  });
  res.once('close', () => clearTimeout(timer));
  res.resume();
}

export function gitHttpClient(opts: GitHttpOptions): GitHttpClient {
  const lookup = checkedLookup(opts.allowPrivate);
  const agents: Record<string, http.Agent> = {
    'http:': new http.Agent({ keepAlive: true, scheduling: 'lifo' }),
    'https:': new https.Agent({ keepAlive: true, scheduling: 'lifo' }),
  };

  const send = (url: URL, req: GitHttpRequest, headers: Record<string, string>, agent: http.Agent | false): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const transport = url.protocol === 'https:' ? https : http;
      const request = transport.request(url, { method: req.method, headers, lookup, agent, timeout: opts.idleTimeoutMs }, (res) => {
        // A body nobody reads any more may still fail later, e.g. on the idle timeout: that must
        // not become an unhandled 'error' event. Readers see errors anyway.
        res.on('error', () => undefined);
        resolve(res);
      });
      request.on('timeout', () => {
        request.destroy(new SyncFailure(`no answer from the upstream within ${opts.idleTimeoutMs} ms`, true));
      });
      request.on('error', (err: NodeJS.ErrnoException) => {
        const stale = request.reusedSocket && typeof err.code === 'string' && STALE_CONNECTION_CODES.has(err.code);
        reject(stale ? Object.assign(err, { staleConnection: true }) : err);
      });
      request.end(req.body);
    });

  return {
    async request(req) {
      const url = new URL(req.url);
      const agent = agents[url.protocol];
      if (!agent) throw new SyncFailure('invalid upstream url (only http and https are supported)', false);
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host)) {
        const refused = policyError(host, opts.allowPrivate);
        if (refused) throw refused;
      }
      const headers: Record<string, string> = { 'user-agent': opts.userAgent, ...req.headers };
      if (req.body) headers['content-length'] = String(req.body.length);
      let res: IncomingMessage;
      try {
        res = await send(url, req, headers, agent);
      } catch (err) {
        if (!(err as { staleConnection?: boolean }).staleConnection) throw err;
        res = await send(url, req, headers, false);
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > req.maxBytes) {
        res.destroy();
        throw tooLong(req);
      }
      const body = cappedBody(res, req);
      return {
        status: res.statusCode ?? 0,
        contentType: (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase(),
        body,
        close() {
          const done = (): void => release(res);
          void body.return(undefined).then(done, done);
        },
      };
    },
  };
}
