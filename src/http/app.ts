import uWS, { type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ServiceError, asServiceError, isServiceError } from '../errors.js';
import { log } from '../log.js';
import { getRepoByName } from '../storage/repo-store.js';
import { LARGE_BODY_BYTES, assertDiskRoom } from '../storage/disk-room.js';
import { fingerprintStream, requestFingerprint } from '../actors/mailbox.js';
import { loadOutcome } from '../storage/idempotency-store.js';
import { checkRepoName } from '../protocol/names.js';
import { canAccessRepo, mayNameRepo } from './auth/principal.js';
import { compileBodyCheck, type BodyCheck } from './body-validator.js';
import { closesAfterTooLarge, DEFAULT_BODY_LIMIT, readBody, streamBody } from './body-reader.js';
import { ambiguousLength, unreadableLength } from './content-length.js';
import { parseJsonBody } from './json-body.js';
import { parseQuery } from './query.js';
import { RequestState } from './request-state.js';
import { send, sendError, sendErrorAndClose, sendStream } from './responder.js';
import { serialize } from '../protocol/serializers.js';
import type { Reply, RequestContext, RouteDef } from './route.js';
import { Router } from './router.js';
import type { Services } from './services.js';
import { KeyRateLimiter } from './key-rate-limiter.js';

if (!String(uWS.App).includes('[native code]')) {
  // A JS fallback would silently cost most of the throughput; refuse to run on it.
  throw new Error('uWebSockets.js did not load its native build (needs Node 20 on x86_64 glibc ≥ 2.36)');
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;
const JSON_TYPE = /^application\/json\s*(;|$)/i;
const JSON_MEDIA_TYPE = 'application/json';
const API_PREFIXES = ['/api/v1/', '/v1/'];
const GIT_AUTH_CHALLENGE = 'Basic realm="repohost"';

/**
 * git sends the token as HTTP Basic's password (any username, API §14); the verifier reads
 * bearer tokens, so a Basic header is handed on as the bearer token it carries.
 */
function gitAuthorization(header: string): string {
  if (!/^basic /i.test(header)) return header;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? '' : `Bearer ${decoded.slice(colon + 1)}`;
}

/**
 * Trace ids: 32 hex digits, a random half per process and a counter — unique, and cheap enough to
 * make for every request although only 5xx answers and logs show them.
 */
const TRACE_PREFIX = randomBytes(8).toString('hex');
let traceCounter = 0;
const nextTraceId = (): string => TRACE_PREFIX + (++traceCounter).toString(16).padStart(16, '0');

interface Prepared {
  route: RouteDef;
  check: BodyCheck<unknown> | null;
}

export interface HttpFrontEnd {
  listen(host: string, port: number): Promise<number>;
  /** Stops accepting connections; `/healthz` answers `draining` until then. */
  stopListening(): void;
  /** Resolves once no request is in flight. */
  idle(): Promise<void>;
}

/**
 * The uWS front end: one handler for every path. It matches the route table, authenticates,
 * checks scope and repository restriction, parses the query, reads and validates the body, and
 * hands a typed context to the route's handler. Every failure becomes the error envelope through
 * `sendError`, the single place where codes meet HTTP statuses.
 */
/** uWS's `LIBUS_LISTEN_EXCLUSIVE_PORT` (its typings declare the options only for a port alone). */
const EXCLUSIVE_PORT = 1;
type ListenCallback = (socket: us_listen_socket | false) => void;

function listenExclusive(app: TemplatedApp, host: string, port: number, cb: ListenCallback): void {
  (app.listen as unknown as (host: string, port: number, options: number, cb: ListenCallback) => TemplatedApp).call(app, host, port, EXCLUSIVE_PORT, cb);
}

export function createFrontEnd(services: Services, routes: RouteDef[]): HttpFrontEnd {
  const router = new Router(routes.filter((r) => !r.git));
  // git's smart HTTP lives at the root, beside the API prefixes (API §14).
  const gitRouter = new Router(routes.filter((r) => r.git));
  const prepared = new Map<RouteDef, Prepared>(routes.map((r) => [r, { route: r, check: r.body ? compileBodyCheck(r.body) : null }]));
  const limiter = new KeyRateLimiter(services.config.keyRateLimit);
  const inFlightIdempotent = new Map<string, Promise<void>>();
  let listenSocket: us_listen_socket | null = null;
  let draining = false;
  let inFlight = 0;
  let idleWaiters: Array<() => void> = [];

  /** The body limit of the route a request names; the default one where it names none. */
  const bodyLimitOf = (method: string, url: string): number => {
    const prefix = API_PREFIXES.find((p) => url.startsWith(p));
    if (!prefix) return DEFAULT_BODY_LIMIT;
    try {
      return router.match(method, url.slice(prefix.length - 1)).route.bodyLimit ?? DEFAULT_BODY_LIMIT;
    } catch {
      return DEFAULT_BODY_LIMIT;
    }
  };

  const app: TemplatedApp = uWS.App();

  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    const started = performance.now();
    const state = new RequestState();
    // uWS needs onAborted only for a response that outlives this callback; a read answered
    // synchronously (the common case) skips it.
    let watching = false;
    const watch = (): void => {
      if (watching) return;
      watching = true;
      res.onAborted(() => state.abort());
    };
    const url = req.getUrl();
    const method = req.getMethod().toUpperCase();

    const incomingId = req.getHeader('x-request-id');
    const requestId = REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    const contentLength = req.getHeader('content-length');
    // Framing comes first, whatever the path: uWS acts on a bad length as soon as this returns.
    // A read without a length (the hot path) skips the walk over its headers.
    if (contentLength !== '' || (method !== 'GET' && method !== 'HEAD')) {
      const refused = unreadableLength(contentLength, () => bodyLimitOf(method, url)) ?? ambiguousLength(req);
      if (refused) {
        sendErrorAndClose(res, state, refused, { 'X-Request-Id': requestId }, nextTraceId());
        services.metrics.requests.observe('unmatched', method, refused.status, (performance.now() - started) / 1000);
        return;
      }
    }
    if (url === '/healthz') {
      if (method === 'GET' || method === 'HEAD') send(res, state, 200, { 'X-Request-Id': requestId, 'Content-Type': 'text/plain' }, draining ? 'draining' : 'ok');
      else sendError(res, state, new ServiceError('METHOD_NOT_ALLOWED', `method ${method} is not allowed here`, { allow: ['GET'] }), { 'X-Request-Id': requestId }, '');
      return;
    }

    const traceId = nextTraceId();
    const headers: Record<string, string> & { authorization: string; 'content-type': string; 'idempotency-key': string } = {
      authorization: req.getHeader('authorization'),
      'content-type': req.getHeader('content-type'),
      'content-length': contentLength,
      accept: req.getHeader('accept'),
      'idempotency-key': req.getHeader('idempotency-key'),
    };
    const rawQuery = req.getQuery() ?? '';
    const baseHeaders = { 'X-Request-Id': requestId };
    let routeLabel = 'unmatched';
    let gitRoute = false;

    const finish = (status: number): void => {
      services.metrics.requests.observe(routeLabel, method, status, (performance.now() - started) / 1000);
    };
    const fail = (err: unknown, close = false): void => {
      const known = asServiceError(err);
      const e = known ?? new ServiceError('INTERNAL_ERROR', 'internal error');
      if (!known) log.error('request failed', { err, trace_id: traceId, request_id: requestId, route: routeLabel });
      // Every 5xx is logged with the trace id its envelope carries, so a client's report can be found.
      else if (e.status >= 500) log.warn('request unavailable', { code: e.code, message: e.message, trace_id: traceId, request_id: requestId, route: routeLabel });
      // A 401 on a git route names the Basic scheme, so git asks its credential helper (API §14).
      const headers = e.status === 401 && gitRoute ? { ...baseHeaders, 'WWW-Authenticate': GIT_AUTH_CHALLENGE } : baseHeaders;
      sendError(res, state, e, headers, traceId, close);
      finish(e.status);
    };

    if (draining) {
      fail(new ServiceError('UNAVAILABLE', 'server is shutting down', undefined, { retryAfter: 1 }), true);
      return;
    }
    const prefix = API_PREFIXES.find((p) => url.startsWith(p));
    let match;
    try {
      match = prefix ? router.match(method, url.slice(prefix.length - 1)) : gitRouter.match(method, url);
    } catch (err) {
      fail(err);
      return;
    }
    const { route, params } = match;
    routeLabel = route.path;
    if (route.git) {
      gitRoute = true;
      headers.authorization = gitAuthorization(headers.authorization);
      headers['content-encoding'] = req.getHeader('content-encoding');
      headers['git-protocol'] = req.getHeader('git-protocol');
    }
    const declared = headers['content-length'] ? Number(headers['content-length']) : 0;
    const limit = route.bodyLimit ?? DEFAULT_BODY_LIMIT;
    const hasBody = route.body !== undefined || route.streamBody === true || route.rawBody === true;
    if (hasBody) watch();
    // The body must be subscribed to synchronously, before this callback returns.
    const bodyPromise = hasBody && !route.streamBody ? readBody(res, state, limit, declared) : null;
    bodyPromise?.catch(() => undefined);
    const bodyStream = route.streamBody ? streamBody(res, state, limit, declared) : null;
    const failAfter = (err: unknown): void => fail(err, isServiceError(err) && err.code === 'PAYLOAD_TOO_LARGE' && closesAfterTooLarge(limit, declared));

    let result: Reply | Promise<Reply>;
    try {
      // A token seen before is answered from the verifier's cache without leaving this callback.
      const principal = services.verifier.authenticate(headers.authorization);
      result = principal instanceof Promise ? principal.then(authorized) : authorized(principal);
    } catch (err) {
      failAfter(err);
      return;
    }
    if (!(result instanceof Promise)) {
      try {
        write(result);
      } catch (err) {
        failAfter(err);
      }
      return;
    }
    watch();
    // A body route pauses once its body is read (body-reader.ts); this request is read already.
    if (!hasBody) state.pauseReading(res);
    inFlight++;
    result
      .then(write)
      .catch(failAfter)
      .finally(() => {
        if (--inFlight === 0 && idleWaiters.length) {
          const waiters = idleWaiters;
          idleWaiters = [];
          for (const w of waiters) w();
        }
      });

    /** Everything after authentication; synchronous unless a body, an idempotency key or the handler needs to wait. */
    function authorized(principal: RequestContext['principal']): Reply | Promise<Reply> {
      limiter.take(principal.key.id);
      const org = principal.org;
      if (params.org !== undefined && params.org !== org.slug) throw new ServiceError('FORBIDDEN', 'this token is not valid for that organization');
      if (!principal.permissions.has(route.permission)) throw new ServiceError('FORBIDDEN', `this token lacks the permission ${route.permission}`);
      const idemKey = method === 'POST' || method === 'PATCH' ? headers['idempotency-key'] : '';
      if (idemKey && idemKey.length > 255) throw new ServiceError('INVALID_REQUEST', 'Idempotency-Key must be at most 255 characters');
      let repo = null;
      let missing: ServiceError | null = null;
      if (params.repo !== undefined) {
        // A name no repository can have (`a/b`, `x.git`, `..`) is a bad path, not a missing repository.
        checkRepoName(params.repo);
        repo = getRepoByName(services.records, org.id, params.repo) ?? null;
        if (!repo) {
          if (!mayNameRepo(principal, params.repo)) throw new ServiceError('FORBIDDEN', 'this token may not access that repository');
          missing = new ServiceError('REPO_NOT_FOUND', `repository "${params.repo}" not found`);
          // With an Idempotency-Key the repository may be missing because the first request
          // renamed or removed it: its stored response is still the answer (below).
          if (!idemKey || route.streamBody) throw missing;
        } else if (!canAccessRepo(principal, repo)) throw new ServiceError('FORBIDDEN', 'this token may not access that repository');
      }
      const query = parseQuery(rawQuery, route.query);
      if (bodyStream && (declared === 0 || declared >= LARGE_BODY_BYTES)) assertDiskRoom(services.config.dataDir, declared, services.config.minFreeBytes);
      if (!bodyPromise && !idemKey) return route.handler(context(principal, repo, query, undefined, null, bodyStream));
      return withBody(principal, repo, query, idemKey, missing);
    }

    async function withBody(
      principal: RequestContext['principal'],
      repo: RequestContext['repo'],
      query: ReturnType<typeof parseQuery>,
      idemKey: string,
      missing: ServiceError | null,
    ): Promise<Reply> {
      let body: unknown = undefined;
      let rawBody: Buffer | null = null;
      if (bodyPromise) {
        rawBody = await bodyPromise;
        const type = headers['content-type'];
        // A raw body goes to the handler as received. Otherwise an empty body means `{}` whatever
        // its type, and a non-empty one must be declared JSON.
        if (route.rawBody) body = rawBody;
        else if (rawBody.length === 0) body = {};
        else {
          if (!JSON_TYPE.test(type)) throw new ServiceError('INVALID_REQUEST', 'request body must be JSON with Content-Type: application/json');
          body = parseJsonBody(rawBody);
        }
        body = prepared.get(route)!.check?.(body) ?? body;
      }
      // Idempotency keys belong to the API; git's smart HTTP only reads, so a key there is ignored.
      if (!idemKey || route.git) return route.handler(context(principal, repo, query, body, null, bodyStream));

      const path = url.slice(prefix!.length - 1);
      let stream = bodyStream;
      let idempotency: RequestContext['idempotency'];
      if (stream) {
        // A streamed body is fingerprinted as the handler reads it; the actor compares the
        // fingerprint with the stored one inside its transaction, so a replay or a conflict is
        // still decided there, after the body has been read.
        const hashed = fingerprintStream(method, path, stream);
        stream = hashed.stream;
        idempotency = { key: idemKey, get fingerprint() { return hashed.fingerprint(); } };
      } else {
        idempotency = { key: idemKey, fingerprint: requestFingerprint(method, path, rawBody ?? '') };
      }
      const slot = `${principal.key.id}\0${idemKey}`;
      // A repeat that arrives while the first is still running waits for it, then replays.
      while (inFlightIdempotent.has(slot)) await inFlightIdempotent.get(slot);
      if (!bodyStream) {
        const prior = loadOutcome(services.storage, services.secrets, principal.key.id, idemKey, Date.now());
        if (prior) {
          if (prior.fingerprint !== idempotency.fingerprint) throw new ServiceError('ABORTED', 'Idempotency-Key was already used with a different request');
          return { status: prior.status, json: prior.body };
        }
      }
      if (missing) throw missing;
      let release!: () => void;
      inFlightIdempotent.set(slot, new Promise<void>((r) => (release = r)));
      try {
        return await route.handler(context(principal, repo, query, body, idempotency, stream));
      } finally {
        inFlightIdempotent.delete(slot);
        release();
      }
    }

    function context(
      principal: RequestContext['principal'],
      repo: RequestContext['repo'],
      query: ReturnType<typeof parseQuery>,
      body: unknown,
      idempotency: RequestContext['idempotency'],
      stream: AsyncIterable<Uint8Array> | null,
    ): RequestContext {
      return {
        method: method as RequestContext['method'],
        path: url,
        params,
        query: query.values,
        queryPairs: query.pairs,
        headers,
        body,
        bodyStream: stream,
        principal,
        org: principal.org,
        repo,
        traceId,
        requestId,
        idempotency,
        services,
        connection: state,
      };
    }

    function write(reply: Reply): void {
      if ('schema' in reply) send(res, state, reply.status, baseHeaders, serialize(reply.schema, reply.value), false, JSON_MEDIA_TYPE, reply.headers);
      else if ('json' in reply) send(res, state, reply.status, baseHeaders, reply.json, false, JSON_MEDIA_TYPE, reply.headers);
      else if ('text' in reply) send(res, state, reply.status, baseHeaders, reply.text, false, null, reply.headers);
      else {
        watch();
        void sendStream(res, state, reply.status, { ...baseHeaders, ...reply.headers }, reply.stream, reply.length).catch((err) => {
          log.error('stream failed', { err, trace_id: traceId });
          if (!state.aborted) res.close();
        });
      }
      finish(reply.status);
    }
  });

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        // Exclusively: by default uWS sets SO_REUSEPORT, and a second server started on the same
        // port would silently take a share of the connections.
        listenExclusive(app, host, port, (socket) => {
          if (!socket) return reject(new Error(`cannot listen on ${host}:${port}: the port is in use or not allowed`));
          listenSocket = socket;
          resolve(uWS.us_socket_local_port(socket as unknown as uWS.us_socket));
        });
      });
    },
    stopListening() {
      draining = true;
      if (listenSocket) uWS.us_listen_socket_close(listenSocket);
      listenSocket = null;
    },
    idle() {
      return inFlight === 0 ? Promise.resolve() : new Promise((r) => idleWaiters.push(r));
    },
  };
}
