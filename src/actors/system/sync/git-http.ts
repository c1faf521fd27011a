/**
 * The HTTP client the git transport uses (isomorphic-git's `HttpClient` shape), on node:http.
 * It enforces the outbound address policy at connection time, against the address actually
 * dialled (so a DNS answer that changed since the URL was saved cannot reach a forbidden host),
 * bounds every request with an idle timeout, and never follows redirects (a redirect could carry
 * the credentials to another host).
 */
import http from 'node:http';
import https from 'node:https';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { classifyAddress } from '../../../net/address-policy.js';
import { SyncFailure } from './sync-errors.js';

export interface GitHttpRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
}

export interface GitHttpResponse {
  url: string;
  method: string;
  statusCode: number;
  statusMessage: string;
  headers: Record<string, string>;
  body: AsyncIterableIterator<Uint8Array>;
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
        if (refused) return callback(refused as unknown as NodeJS.ErrnoException, '', 4);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

async function collect(body: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of body) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

export function gitHttpClient(opts: GitHttpOptions): GitHttpClient {
  const lookup = checkedLookup(opts.allowPrivate);
  return {
    async request(req) {
      const url = new URL(req.url);
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host)) {
        const refused = policyError(host, opts.allowPrivate);
        if (refused) throw refused;
      }
      // Bodies are small protocol requests or one packfile: send them with a Content-Length.
      const body = req.body ? await collect(req.body) : null;
      const headers: Record<string, string> = { 'user-agent': opts.userAgent, ...req.headers };
      if (body) headers['content-length'] = String(body.length);
      const method = req.method ?? 'GET';
      const transport = url.protocol === 'https:' ? https : http;
      return new Promise<GitHttpResponse>((resolve, reject) => {
        const request = transport.request(url, { method, headers, lookup, timeout: opts.idleTimeoutMs }, (res) => {
          // A body nobody reads any more (an error answer) may still fail later, e.g. on the idle
          // timeout: that must not become an unhandled 'error' event. Readers see errors anyway.
          res.on('error', () => undefined);
          const flat: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve({
            url: req.url,
            method,
            statusCode: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? '',
            headers: flat,
            body: res[Symbol.asyncIterator]() as AsyncIterableIterator<Uint8Array>,
          });
        });
        request.on('timeout', () => {
          const err = Object.assign(new Error(`no answer from the upstream within ${opts.idleTimeoutMs} ms`), { code: 'ETIMEDOUT' });
          request.destroy(err);
        });
        request.on('error', reject);
        request.end(body ?? undefined);
      });
    },
  };
}
