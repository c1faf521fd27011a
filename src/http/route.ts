import type { Static, TSchema } from '@sinclair/typebox';
import type { SchemaName } from '../protocol/schemas/index.js';
import type { OrgRecord, RepoRecord } from '../storage/records.js';
import type { Permission } from './auth/permissions.js';
import type { Principal } from './auth/principal.js';
import type { RequestState } from './request-state.js';
import type { Services } from './services.js';
import type { HeaderBlock } from './wire-bytes.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** How a route's query string is checked: declared keys only, or (content) any key. */
export interface QuerySpec {
  keys: Record<string, QueryParam>;
  /** Unknown keys are passed through instead of refused (API §7 metadata filters). */
  open?: boolean;
}

export type QueryParam =
  | { type: 'int'; min: number; max: number; default?: number }
  | { type: 'string'; enum?: readonly string[]; default?: string; minLength?: number; maxLength?: number };

export interface RequestContext<Body = unknown> {
  method: Method;
  /** The path after the API prefix, still percent-encoded. */
  path: string;
  params: Record<string, string>;
  query: Record<string, string | number | undefined>;
  /** Every query pair in order, decoded (for open query specs). */
  queryPairs: Array<[string, string]>;
  headers: Record<string, string>;
  /** The parsed body, checked against the route's schema and typed by it (undefined for routes without one). */
  body: Body;
  /** For `streamBody` routes: the request body as it arrives. */
  bodyStream: AsyncIterable<Uint8Array> | null;
  principal: Principal;
  org: OrgRecord;
  /** Resolved for routes with `{repo}`: existence and the token's restriction already checked. */
  repo: RepoRecord | null;
  traceId: string;
  requestId: string;
  /**
   * `Idempotency-Key` plus the request fingerprint, for commands that must not apply twice, and
   * the actor the route declared (`RouteDef.actor`): the one its command must go to.
   */
  idempotency: { key: string; fingerprint: string; actor: string } | null;
  services: Services;
  /** The request's connection: a command is sent to an actor only once it has settled. */
  connection: Pick<RequestState, 'connectionSettled'>;
}

export type Reply =
  | { status: number; schema: SchemaName; value: unknown; headers?: Record<string, string> }
  | { status: number; json: Uint8Array | string; headers?: Record<string, string> }
  /** A streamed body: of known `length`, or sent chunked when `length` is null. */
  | { status: number; stream: AsyncIterable<Uint8Array>; length: number | null; headers: Record<string, string> }
  /** `headers`: a block made once when the same headers answer many requests (wire-bytes.ts). */
  | { status: number; text: string | Uint8Array; headers: Record<string, string> | HeaderBlock };

export interface RouteDef<Body = unknown> {
  method: Method;
  /** Pattern after the API prefix, e.g. `/{org}/{repo}/bookmarks/{bookmark}` (for a git route, the whole path). */
  path: string;
  permission: Permission;
  /** The JSON body's schema (src/protocol/schemas); a route with one is made by `withBody`. */
  body?: TSchema;
  /** Largest accepted body in bytes (default 1 MiB, API §1). */
  bodyLimit?: number;
  /** The handler reads the body itself, as a stream (large writes). */
  streamBody?: boolean;
  /** The body is passed to the handler as the bytes received (a Buffer in `body`), not parsed. */
  rawBody?: boolean;
  /**
   * A git smart-HTTP route (API §14): served at the root, outside the API prefixes; the token may
   * come as HTTP Basic's password, and a 401 names the Basic scheme so git asks for credentials.
   */
  git?: boolean;
  /**
   * The actor a write's command runs in: the org's, or that of the repository `{repo}` names. The
   * request's Idempotency-Key record is on that actor's shard; every API route that takes a key
   * (POST, PATCH) declares it.
   */
  actor?: 'org' | 'repo';
  query?: QuerySpec;
  handler(ctx: RequestContext<Body>): Promise<Reply> | Reply;
}

/** A route with a JSON body: its handler receives the body as the type of the route's schema. */
export function withBody<S extends TSchema>(body: S, route: Omit<RouteDef<Static<S>>, 'body'>): RouteDef<Static<S>> {
  return { ...route, body };
}
