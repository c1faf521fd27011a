import uWS, { type HttpRequest, type TemplatedApp, type us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import { performance } from 'node:perf_hooks';
import { ServiceError, asServiceError, isServiceError } from '../errors.js';
import { log } from '../log.js';
import { getRepoByName, getRepoResolvedElsewhere } from '../storage/repo-store.js';
import { LARGE_BODY_BYTES, assertDiskRoom } from '../storage/disk-room.js';
import { checkRepoName } from '../protocol/names.js';
import { canAccessRepo, mayNameRepo, tokenReach, type Principal } from './auth/principal.js';
import { compileBodyCheck, type BodyCheck } from './body-validator.js';
import { closesAfterTooLarge, DEFAULT_BODY_LIMIT, readBody, streamBody } from './body-reader.js';
import { ambiguousLength, unreadableLength } from './content-length.js';
import { parseJsonBody } from './json-body.js';
import { parseQuery } from './query.js';
import { send, sendError, sendErrorAndClose, sendStream } from './responder.js';
import { serialize } from '../protocol/serializers.js';
import type { Reply, RequestContext, RouteDef } from './route.js';
import { Router, type Match } from './router.js';
import type { Services } from './services.js';
import { KeyRateLimiter } from './key-rate-limiter.js';
import { IdempotencyGate } from './idempotency-gate.js';
import { idempotencyTarget } from './idempotency-target.js';
import { HOP_HEADER, NODE_HEADER, REPO_HEADER, type HopMarkers, type ReceivedBody, type RequestPlacement } from './forwarding.js';
import type { ReadTicket } from './read-fence.js';
import { Exchange } from './exchange.js';
import { wireBytes } from './wire-bytes.js';
import { orgShard, repoShard } from '../storage/shards.js';

if (!String(uWS.App).includes('[native code]')) {
  // A JS fallback would silently cost most of the throughput; refuse to run on it.
  throw new Error('uWebSockets.js did not load its native build (needs Node 20 on x86_64 glibc ≥ 2.36)');
}

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

/** uWS's `LIBUS_LISTEN_EXCLUSIVE_PORT` (its typings declare the options only for a port alone). */
const EXCLUSIVE_PORT = 1;
type ListenCallback = (socket: us_listen_socket | false) => void;

function listenExclusive(app: TemplatedApp, host: string, port: number, cb: ListenCallback): void {
  (app.listen as unknown as (host: string, port: number, options: number, cb: ListenCallback) => TemplatedApp).call(app, host, port, EXCLUSIVE_PORT, cb);
}

export interface HttpFrontEnd {
  listen(host: string, port: number): Promise<number>;
  /** Stops accepting connections; `/healthz` answers `draining` until then. */
  stopListening(): void;
  /** Resolves once no request is in flight. */
  idle(): Promise<void>;
}

/** The headers a route may read; the ones every request has are always there (possibly empty). */
type RequestHeaders = Record<string, string> & { authorization: string; 'content-type': string; 'idempotency-key': string };

/** The request as the route's steps see it: its route, headers, query and body, subscribed to in the callback. */
interface Routed extends ReceivedBody, HopMarkers {
  match: Match;
  /** The API path (after the prefix); null on git's routes. */
  path: string | null;
  headers: RequestHeaders;
  rawQuery: string;
  /** The route's body limit. */
  limit: number;
}

/** What authorization found: the repository of `{repo}`, or why it is missing; the idempotency key. */
interface Authorized {
  principal: Principal;
  repo: RequestContext['repo'];
  /** A missing repository, answered unless a stored response for the Idempotency-Key comes first. */
  missing: ServiceError | null;
  idemKey: string;
}

/**
 * The uWS front end, one handler for every path, in named steps: framing → route → subscribe to
 * the body → authenticate → authorize → query → body → idempotency → handler → respond. A step
 * that fails ends in `fail`: the error envelope through `sendError`, the single place where codes
 * meet HTTP statuses. Everything up to the handler runs inside uWS's callback when it can: a read
 * with a cached token is answered before the callback returns.
 */
class FrontEnd implements HttpFrontEnd {
  private readonly router: Router;
  /** git's smart HTTP lives at the root, beside the API prefixes (API §14). */
  private readonly gitRouter: Router;
  private readonly bodyChecks: Map<RouteDef, BodyCheck<unknown>>;
  private readonly limiter: KeyRateLimiter;
  private readonly idempotency: IdempotencyGate;
  private readonly app: TemplatedApp = uWS.App();
  private listenSocket: us_listen_socket | null = null;
  private draining = false;
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly services: Services,
    routes: RouteDef[],
  ) {
    const undeclared = routes.find((r) => !r.git && !r.actor && (r.method === 'POST' || r.method === 'PATCH'));
    if (undeclared) throw new Error(`${undeclared.method} ${undeclared.path} takes an Idempotency-Key but does not name its actor`);
    this.router = new Router(routes.filter((r) => !r.git));
    this.gitRouter = new Router(routes.filter((r) => r.git));
    this.bodyChecks = new Map(routes.filter((r) => r.body).map((r) => [r, compileBodyCheck(r.body!)]));
    this.limiter = new KeyRateLimiter(services.config.keyRateLimit);
    this.idempotency = new IdempotencyGate(services);
    this.app.any('/*', (res, req) => {
      const x = new Exchange(res, req);
      x.state.inCallback = true;
      try {
        this.onRequest(x, req);
      } finally {
        x.state.inCallback = false;
      }
    });
  }

  private onRequest(x: Exchange, req: HttpRequest): void {
    if (!this.framed(x, req)) return;
    if (x.url === '/healthz') return this.health(x);
    if (this.services.forwarding) x.baseHeaders[NODE_HEADER] = this.services.forwarding.nodeId;
    if (this.draining) return this.fail(x, new ServiceError('UNAVAILABLE', 'server is shutting down', undefined, { retryAfter: 1 }), true);
    let routed: Routed;
    try {
      routed = this.route(x, req);
    } catch (err) {
      return this.fail(x, err);
    }
    this.authenticate(x, routed);
  }

  /**
   * Framing comes first, whatever the path: uWS acts on a bad length as soon as the callback
   * returns. A read without a length (the hot path) skips the walk over its headers.
   */
  private framed(x: Exchange, req: HttpRequest): boolean {
    if (x.contentLength === '' && (x.method === 'GET' || x.method === 'HEAD')) return true;
    const refused = unreadableLength(x.contentLength, () => this.bodyLimitOf(x.method, x.url)) ?? ambiguousLength(req);
    if (!refused) return true;
    sendErrorAndClose(x.res, x.state, refused, x.baseHeaders, x.traceId);
    this.services.metrics.requests.observe('unmatched', x.method, refused.status, (performance.now() - x.started) / 1000);
    return false;
  }

  /** The body limit of the route a request names; the default one where it names none. */
  private bodyLimitOf(method: string, url: string): number {
    const prefix = API_PREFIXES.find((p) => url.startsWith(p));
    if (!prefix) return DEFAULT_BODY_LIMIT;
    try {
      return this.router.match(method, url.slice(prefix.length - 1), url).route.bodyLimit ?? DEFAULT_BODY_LIMIT;
    } catch {
      return DEFAULT_BODY_LIMIT;
    }
  }

  private health(x: Exchange): void {
    if (x.method === 'GET' || x.method === 'HEAD') send(x.res, x.state, 200, { ...x.baseHeaders, 'Content-Type': 'text/plain' }, this.draining ? 'draining' : 'ok');
    else sendError(x.res, x.state, new ServiceError('METHOD_NOT_ALLOWED', `method ${x.method} is not allowed here`, { allow: ['GET'] }), x.baseHeaders, x.traceId);
  }

  /**
   * Matches the route, reads the headers it needs and subscribes to its body: uWS hands over the
   * request's headers and body only inside its callback.
   */
  private route(x: Exchange, req: HttpRequest): Routed {
    const prefix = API_PREFIXES.find((p) => x.url.startsWith(p));
    const path = prefix ? x.url.slice(prefix.length - 1) : null;
    const match = path !== null ? this.router.match(x.method, path, x.url) : this.gitRouter.match(x.method, x.url, x.url);
    const { route } = match;
    x.routeLabel = route.path;
    const hasBody = route.body !== undefined || route.streamBody === true || route.rawBody === true;
    // Each header read is a call into uWS: a read skips the ones only writes use.
    const headers: RequestHeaders = {
      authorization: req.getHeader(wireBytes('authorization')),
      'content-type': hasBody ? req.getHeader(wireBytes('content-type')) : '',
      'content-length': x.contentLength,
      accept: req.getHeader(wireBytes('accept')),
      'idempotency-key': x.method === 'POST' || x.method === 'PATCH' ? req.getHeader(wireBytes('idempotency-key')) : '',
    };
    if (route.git) {
      x.gitRoute = true;
      headers.authorization = gitAuthorization(headers.authorization);
      headers['content-encoding'] = req.getHeader(wireBytes('content-encoding'));
      headers['git-protocol'] = req.getHeader(wireBytes('git-protocol'));
    }
    const declared = x.contentLength ? Number(x.contentLength) : 0;
    const limit = route.bodyLimit ?? DEFAULT_BODY_LIMIT;
    if (hasBody) x.watch();
    const body = hasBody && !route.streamBody ? readBody(x.res, x.state, limit, declared) : null;
    body?.catch(() => undefined);
    const bodyStream = route.streamBody ? streamBody(x.res, x.state, limit, declared) : null;
    const clustered = this.services.forwarding !== null;
    const hop = clustered ? req.getHeader(wireBytes(HOP_HEADER)) : '';
    const hopRepo = clustered ? req.getHeader(wireBytes(REPO_HEADER)) : '';
    return { match, path, headers, rawQuery: req.getQuery() ?? '', declared, limit, body, bodyStream, hop, hopRepo };
  }

  /** A token seen before is answered from the verifier's cache, without leaving uWS's callback. */
  private authenticate(x: Exchange, r: Routed): void {
    let reply: Reply | Promise<Reply>;
    try {
      const principal = this.services.verifier.authenticate(r.headers.authorization);
      reply = principal instanceof Promise ? principal.then((p) => this.handle(x, r, p)) : this.handle(x, r, principal);
    } catch (err) {
      return this.failAfterRouting(x, r, err);
    }
    if (reply instanceof Promise) return this.respondLater(x, r, reply);
    try {
      this.respond(x, reply);
    } catch (err) {
      this.failAfterRouting(x, r, err);
    }
  }

  /** Everything after authentication; synchronous unless a body, an idempotency key or the handler needs to wait. */
  private handle(x: Exchange, r: Routed, principal: Principal): Reply | Promise<Reply> {
    const placed = this.place(x, r, principal);
    if (!placed) return this.serve(x, r, principal, null, null);
    // Cluster mode: what was read here of the org's shard (its name index) and the repository's
    // is answered once the log holds what the reads saw (read-fence.ts).
    const ticket = this.services.readFence!.open();
    ticket.read(orgShard(principal.org.id));
    const replies = r.match.route.actor === undefined;
    if (!placed.here) {
      const { reply } = placed;
      return ticket.answer(() => reply, replies);
    }
    const { repoId } = placed;
    return ticket.answer(() => this.serve(x, r, principal, repoId, ticket), replies);
  }

  /** The request served here: authorization, query, then the body or the handler. */
  private serve(x: Exchange, r: Routed, principal: Principal, resolvedId: string | null, ticket: ReadTicket | null): Reply | Promise<Reply> {
    const access = this.authorize(x, r, principal, resolvedId, ticket);
    // A forwarded request names the repository it resolved to: the entry node remembers it.
    if (r.hop !== '' && access.repo) x.baseHeaders[REPO_HEADER] = access.repo.id;
    const query = parseQuery(r.rawQuery, r.match.route.query);
    if (r.bodyStream && (r.declared === 0 || r.declared >= LARGE_BODY_BYTES)) assertDiskRoom(this.services.config.dataDir, r.declared, this.services.config.minFreeBytes);
    if (!r.body && !access.idemKey) return r.match.route.handler(this.context(x, r, access, query, undefined, null, r.bodyStream));
    return this.withBody(x, r, access, query);
  }

  /**
   * Cluster mode: a request for the token's org is served where the shards its front end reads
   * are (docs/design.md, "Forwarding"), before anything here reads them or counts the key's rate.
   */
  private place(x: Exchange, r: Routed, principal: Principal): RequestPlacement | null {
    const { forwarding } = this.services;
    const { params } = r.match;
    if (!forwarding || params.org === undefined || params.org !== principal.org.slug) return null;
    return forwarding.place({
      method: x.method,
      url: x.url,
      rawQuery: r.rawQuery,
      params,
      orgId: principal.org.id,
      headers: r.headers,
      requestId: x.requestId,
      hop: r.hop,
      hopRepo: r.hopRepo,
      body: r.body,
      bodyStream: r.bodyStream,
      declared: r.declared,
    });
  }

  /**
   * The token's rate, org, permission and repository restriction; the repository the path names
   * (or, in a cluster, the one the org's owner resolved the name to: `resolvedId`, and the
   * repository's shard is noted on the request's `ticket`).
   */
  private authorize(x: Exchange, r: Routed, principal: Principal, resolvedId: string | null, ticket: ReadTicket | null): Authorized {
    const { route, params } = r.match;
    this.limiter.take(principal.key.id);
    if (params.org !== undefined && params.org !== principal.org.slug) throw new ServiceError('FORBIDDEN', 'this token is not valid for that organization');
    if (!principal.permissions.has(route.permission)) throw new ServiceError('FORBIDDEN', `this token lacks the permission ${route.permission}`);
    const idemKey = x.method === 'POST' || x.method === 'PATCH' ? r.headers['idempotency-key'] : '';
    if (idemKey.length > 255) throw new ServiceError('INVALID_REQUEST', 'Idempotency-Key must be at most 255 characters');
    if (params.repo === undefined) return { principal, repo: null, missing: null, idemKey };
    // A name no repository can have (`a/b`, `x.git`, `..`) is a bad path, not a missing repository.
    checkRepoName(params.repo);
    const { records } = this.services;
    const repo = (resolvedId === null ? getRepoByName(records, principal.org.id, params.repo) : getRepoResolvedElsewhere(records, principal.org.id, params.repo, resolvedId)) ?? null;
    if (repo) {
      ticket?.read(repoShard(repo.id));
      if (!canAccessRepo(principal, repo)) throw new ServiceError('FORBIDDEN', 'this token may not access that repository');
      return { principal, repo, missing: null, idemKey };
    }
    if (!mayNameRepo(principal, params.repo)) throw new ServiceError('FORBIDDEN', 'this token may not access that repository');
    const missing = new ServiceError('REPO_NOT_FOUND', `repository "${params.repo}" not found`);
    // With an Idempotency-Key the repository may be missing because the first request renamed or
    // removed it: its stored response is still the answer (`idempotent`).
    if (!idemKey || !route.actor) throw missing;
    return { principal, repo: null, missing, idemKey };
  }

  /** Waits for the whole body, then parses and checks it; then the idempotency step. */
  private async withBody(x: Exchange, r: Routed, access: Authorized, query: ReturnType<typeof parseQuery>): Promise<Reply> {
    const raw = r.body ? await r.body : null;
    const body = raw ? this.parsedBody(r, raw) : undefined;
    // Idempotency keys belong to the API's writes, which name their actor; git's smart HTTP
    // names none (its pushes are not replayed), so a key there is ignored.
    if (!access.idemKey || !r.match.route.actor) return r.match.route.handler(this.context(x, r, access, query, body, null, r.bodyStream));
    return this.idempotent(x, r, access, query, body, raw);
  }

  /**
   * A raw body goes to the handler as received. Otherwise an empty body means `{}` whatever its
   * type, and a non-empty one must be declared JSON and fit the route's schema.
   */
  private parsedBody(r: Routed, raw: Buffer): unknown {
    const { route } = r.match;
    if (route.rawBody) return raw;
    let body: unknown = {};
    if (raw.length > 0) {
      if (!JSON_TYPE.test(r.headers['content-type'])) throw new ServiceError('INVALID_REQUEST', 'request body must be JSON with Content-Type: application/json');
      body = parseJsonBody(raw);
    }
    const check = this.bodyChecks.get(route);
    return check ? check(body) : body;
  }

  /** An Idempotency-Key (API §1): the handler runs behind the gate (idempotency-gate.ts). */
  private idempotent(x: Exchange, r: Routed, access: Authorized, query: ReturnType<typeof parseQuery>, body: unknown, raw: Buffer | null): Promise<Reply> {
    const request = { method: x.method, path: r.path!, reach: tokenReach(access.principal), raw, stream: r.bodyStream };
    const { route, params } = r.match;
    const target = idempotencyTarget(this.services.storage.meta, route, access.principal.org.id, params.repo, access.repo);
    return this.idempotency.run(access.principal.key.id, access.idemKey, request, target, access.missing, (idempotency, stream) =>
      route.handler(this.context(x, r, access, query, body, idempotency, stream)),
    );
  }

  private context(
    x: Exchange,
    r: Routed,
    access: Authorized,
    query: ReturnType<typeof parseQuery>,
    body: unknown,
    idempotency: RequestContext['idempotency'],
    bodyStream: AsyncIterable<Uint8Array> | null,
  ): RequestContext {
    return {
      method: x.method as RequestContext['method'],
      path: x.url,
      params: r.match.params,
      query: query.values,
      queryPairs: query.pairs,
      headers: r.headers,
      body,
      bodyStream,
      principal: access.principal,
      org: access.principal.org,
      repo: access.repo,
      traceId: x.traceId,
      requestId: x.requestId,
      idempotency,
      services: this.services,
      connection: x.state,
    };
  }

  /** A reply that needs to wait: counted in flight (for `idle`), answered when it settles. */
  private respondLater(x: Exchange, r: Routed, reply: Promise<Reply>): void {
    x.watch();
    // A body route pauses once its body is read (body-reader.ts); this request is read already.
    if (!r.body && !r.bodyStream) x.state.pauseReading(x.res);
    this.inFlight++;
    reply
      .then((value) => this.respond(x, value))
      .catch((err: unknown) => this.failAfterRouting(x, r, err))
      .finally(() => {
        if (--this.inFlight === 0 && this.idleWaiters.length) {
          const waiters = this.idleWaiters;
          this.idleWaiters = [];
          for (const w of waiters) w();
        }
      });
  }

  private respond(x: Exchange, reply: Reply): void {
    const { res, state, baseHeaders } = x;
    // A reply's own headers win over the base ones: a proxied reply names its owner's node.
    if ('schema' in reply) send(res, state, reply.status, baseHeaders, serialize(reply.schema, reply.value), false, JSON_MEDIA_TYPE, reply.headers);
    else if ('json' in reply) send(res, state, reply.status, baseHeaders, reply.json, false, JSON_MEDIA_TYPE, reply.headers);
    else if ('text' in reply) send(res, state, reply.status, baseHeaders, reply.text, false, null, reply.headers);
    else {
      x.watch();
      void sendStream(res, state, reply.status, baseHeaders, reply.stream, reply.length, reply.headers).catch((err) => {
        log.error('stream failed', { err, trace_id: x.traceId });
        if (!state.aborted) res.close();
      });
    }
    this.observe(x, reply.status);
  }

  /**
   * Once a body may be on its way, a refusal for its size also closes the connection unless what
   * is left of the body is small enough to read and drop (body-reader.ts).
   */
  private failAfterRouting(x: Exchange, r: Routed, err: unknown): void {
    this.fail(x, err, isServiceError(err) && err.code === 'PAYLOAD_TOO_LARGE' && closesAfterTooLarge(r.limit, r.declared));
  }

  private fail(x: Exchange, err: unknown, close = false): void {
    const known = asServiceError(err);
    const e = known ?? new ServiceError('INTERNAL_ERROR', 'internal error');
    const where = { trace_id: x.traceId, request_id: x.requestId, route: x.routeLabel };
    if (!known) log.error('request failed', { err, ...where });
    // Every 5xx is logged with the trace id its envelope carries, so a client's report can be found.
    else if (e.status >= 500) log.warn('request unavailable', { code: e.code, message: e.message, ...where });
    const headers = e.status === 401 && x.gitRoute ? { ...x.baseHeaders, 'WWW-Authenticate': GIT_AUTH_CHALLENGE } : x.baseHeaders;
    sendError(x.res, x.state, e, headers, x.traceId, close);
    this.observe(x, e.status);
  }

  private observe(x: Exchange, status: number): void {
    this.services.metrics.requests.observe(x.routeLabel, x.method, status, (performance.now() - x.started) / 1000);
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      // Exclusively: by default uWS sets SO_REUSEPORT, and a second server started on the same
      // port would silently take a share of the connections.
      listenExclusive(this.app, host, port, (socket) => {
        if (!socket) return reject(new Error(`cannot listen on ${host}:${port}: the port is in use or not allowed`));
        this.listenSocket = socket;
        resolve(uWS.us_socket_local_port(socket));
      });
    });
  }

  stopListening(): void {
    this.draining = true;
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
  }

  idle(): Promise<void> {
    return this.inFlight === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

export function createFrontEnd(services: Services, routes: RouteDef[]): HttpFrontEnd {
  return new FrontEnd(services, routes);
}
