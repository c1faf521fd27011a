import fc from 'fast-check';
import type { QueryParam, RouteDef } from '../../src/http/route.js';
import { applyOpsBody, createChangeBody, patchChangeBody } from '../../src/protocol/schemas/changes.js';
import type { JsonSchema } from '../../src/protocol/schemas/common.js';
import { CLAIMS_TEMPLATE, HEADER_TEMPLATE, INVALID_TOKENS, VALID_TOKENS, type FuzzFixture, type TokenName } from './fuzz-fixture.js';
import { FixtureRef, schemaValue, toJsonText, type Hints } from './json-values.js';
import { PROTO_KEYS, RAW_URL_PIECES, edgeString, mutateText, mutateValue, textMutation, valueMutation, type TextMutation, type ValueMutation } from './mutations.js';

/**
 * Requests for the routes of the route table, as plain data (a plan) that fast-check draws and
 * shrinks, and their bytes on the wire. Every part comes from the route's own definition — its
 * path pattern, its query spec, its body schema — and is then, with the weights of a profile,
 * mutated.
 */

const ref = (name: string): FixtureRef => new FixtureRef(name);

/**
 * uWS closes the connection without an answer once a request head passes 128 KiB (a front-end
 * limit, not a route's), so pieces of the target stay at a few KiB, the target at 64 KiB and the
 * Authorization header at 32 KiB.
 */
const MAX_TARGET_BYTES = 64 * 1024;
/** Mutated claims can make a token of megabytes; past 8 KiB the server refuses it unread anyway. */
const MAX_AUTHORIZATION_CHARS = 32 * 1024;
const urlEdgeString = edgeString.filter((s) => s.length <= 4097);
/** Twice the 1 MiB limit: enough to cross it, small enough that grown arrays do not make bodies of many MiB. */
const MAX_BODY_BYTES = 2 * 1024 * 1024;

/** Bodies of the routes that read their body as a stream: their schemas are checked by the handler, not the route table. */
const STREAMED_SCHEMAS: Record<string, JsonSchema> = {
  'POST /{org}/{repo}/apply-ops': applyOpsBody,
  'POST /{org}/{repo}/changes': createChangeBody,
  'PATCH /{org}/{repo}/changes/{change_id}': patchChangeBody,
};
/** Raw bytes, not JSON. */
const RAW_BODY_ROUTES = new Set(['POST /{org}/{repo}/blobs']);

export const routeLabel = (route: RouteDef): string => `${route.method} ${route.path}`;

export function bodySchema(route: RouteDef): JsonSchema | null {
  const label = routeLabel(route);
  if (route.body) return route.body;
  // git's routes take pkt-lines and packs, not JSON: the fuzzer sends them no body.
  if (!route.streamBody || route.git || RAW_BODY_ROUTES.has(label)) return null;
  const schema = STREAMED_SCHEMAS[label];
  if (!schema) throw new Error(`the fuzzer has no body schema for the streamed route ${label}: add it to STREAMED_SCHEMAS`);
  return schema;
}

export const takesBody = (route: RouteDef): boolean => route.body !== undefined || route.streamBody === true;

/** Body fields whose values are also drawn from the fixture. */
const BODY_HINTS: Hints = {
  change_id: [ref('change'), ref('change2'), ref('root')],
  base_change_id: [ref('change'), ref('change2'), ref('root')],
  expected_change_id: [ref('change'), ref('change2')],
  expected_commit_oid: [ref('commit')],
  base_commit_oid: [ref('commit')],
  blob_oid: [ref('blob')],
  name: [ref('bookmark'), ref('bookmark2'), ref('new_name')],
  target: [ref('bookmark'), ref('bookmark2')],
  source: [ref('bookmark2'), ref('bookmark')],
  default_bookmark: [ref('bookmark')],
  path: [ref('path'), ref('dir'), ref('file'), ref('new_path')],
  from: [ref('path'), ref('file')],
  to: [ref('new_path')],
  url: [ref('hook_url'), ref('upstream_url'), 'http://[::]:1/', 'http://0.0.0.0:1/', 'http://169.254.169.254/latest', 'http://[::ffff:127.0.0.1]:1/', 'file:///etc/passwd', 'http://user:pw@127.0.0.1:1/', 'http://localhost:1/'],
  repo_ids: [ref('repo_ids')],
};

/** A valid body of each writing route, for mutations to start from deep inside the handler. */
const EXAMPLE_BODIES: Record<string, unknown[]> = {
  'POST /{org}/repos': [{ name: ref('new_name') }, { name: ref('new_name'), default_bookmark: 'trunk', tags: { team: 'fuzz' } }],
  'PATCH /{org}/{repo}': [{ tags: { team: 'fuzz', gone: null } }, { default_bookmark: ref('bookmark') }, { upstream: { url: ref('upstream_url'), auth: { kind: 'token', token: 't' } } }],
  'POST /{org}/{repo}/bookmarks': [{ name: ref('new_name'), change_id: ref('change2') }],
  'PATCH /{org}/{repo}/bookmarks': [{ moves: [{ name: ref('bookmark2'), change_id: ref('change2'), allow_backwards: true }] }],
  'POST /{org}/{repo}/bookmarks/merge': [{ target: ref('bookmark'), source: ref('bookmark2') }, { target: ref('bookmark'), source: ref('bookmark2'), message: 'merge', allow_conflicted: true }],
  'PATCH /{org}/{repo}/bookmarks/{bookmark}': [{ change_id: ref('change2'), allow_backwards: true }],
  'POST /{org}/{repo}/changes': [{ base_change_id: ref('change'), message: 'files', files: [{ path: ref('new_path'), content: 'aGkK' }] }],
  'PATCH /{org}/{repo}/changes/{change_id}': [{ message: 'evolved' }, { files: [{ path: ref('new_path'), content: 'aGkK' }], base_commit_oid: ref('commit') }],
  'POST /{org}/{repo}/apply-ops': [
    { base_change_id: ref('change'), ops: [{ op: 'write', path: ref('new_path'), content: 'x\n' }] },
    { change_id: ref('change2'), ops: [{ op: 'set_metadata', path: ref('path'), metadata: { k: 'v', gone: null } }, { op: 'write', path: ref('new_path'), blob_oid: ref('blob') }], bookmarks: [{ name: ref('bookmark2') }] },
  ],
  'POST /{org}/{repo}/upstream/syncs': [{ direction: 'pull' }, { direction: 'push', ref_globs: { branches: 'ma*', tags: null } }],
  'POST /{org}/{repo}/push': [{}],
  'POST /{org}/webhook-targets': [{ url: ref('hook_url'), events: ['push'] }],
  'PATCH /{org}/webhook-targets/{id}': [{ name: 'renamed' }, { events: ['push', 'sync.failed'], repo_ids: ref('repo_ids') }],
  'POST /{org}/webhook-targets/{id}/rotate-secret': [{}],
  'POST /{org}/webhook-targets/{id}/deliveries/{deliveryId}/redeliver': [{}],
};

/** Path parameters: the fixture's own values, and well-formed ones that name nothing. */
const PARAM_REFS: Record<string, FixtureRef[]> = {
  org: [ref('org')],
  repo: [ref('repo'), ref('repo2')],
  bookmark: [ref('bookmark'), ref('bookmark2')],
  change_id: [ref('change'), ref('change2'), ref('root')],
  syncId: [ref('sync')],
  id: [ref('target')],
  deliveryId: [ref('delivery')],
};
const PARAM_UNKNOWN: Record<string, string[]> = {
  org: ['other', 'nope', 'whoami', 'ACME'],
  repo: ['nope', 'R1', 'repos', 'x.git', 'a'.repeat(100)],
  bookmark: ['nope', 'feat/x', 'HEAD', 'a..b', 'merge'],
  change_id: ['k'.repeat(32), 'z'.repeat(31), 'a'.repeat(32)],
  syncId: ['sync_01NOPE', 'x'],
  id: ['wht_01NOPE', 'x'],
  deliveryId: ['dlv_01NOPE', 'x'],
};

/** Tag filters (API §4.3): valid ones, and ones past the depth and clause limits or reaching for prototypes. */
const filterLeaf = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }),
  fc.record({ op: fc.constantFrom('$eq', '$in', '$contains', '$starts_with', '$ends_with', '$exists', '$EQ', '$nope'), arg: fc.oneof(fc.string({ maxLength: 4 }), fc.boolean(), fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 })) }).map(({ op, arg }) => ({ [op]: arg })),
);
const filterObject: fc.Arbitrary<unknown> = fc.letrec<{ filter: unknown }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.dictionary(fc.oneof(fc.constantFrom('team', 'env', 'TEAM', ...PROTO_KEYS), fc.string({ maxLength: 5 })), filterLeaf, { maxKeys: 3 }),
    fc.record({ op: fc.constantFrom('$and', '$or', '$AND'), subs: fc.array(tie('filter'), { minLength: 0, maxLength: 3 }) }).map(({ op, subs }) => ({ [op]: subs })),
    tie('filter').map((sub) => ({ $not: sub })),
  ),
})).filter;
const tagFilter: fc.Arbitrary<Piece> = fc.oneof(
  { weight: 4, arbitrary: filterObject.map((v) => ({ text: toJsonText(v, () => null) })) },
  { weight: 1, arbitrary: fc.constantFrom(9, 10, 1000).map((depth) => ({ text: '{"$not":'.repeat(depth) + '{"team":"x"}' + '}'.repeat(depth) })) },
  { weight: 1, arbitrary: fc.constant({ text: JSON.stringify({ $or: Array.from({ length: 101 }, (_, i) => ({ [`k${i}`]: 'v' })) }) }) },
  { weight: 1, arbitrary: fc.constantFrom('{"__proto__":{"$eq":"x"}}', '{"constructor":"x"}', '{"team":{"$exists":"yes"}}', '[]', 'null', '{', '"x"').map((text) => ({ text })) },
);

/** Query values a client would send, by key; keys not listed get short strings. */
const cursorOf = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const QUERY_VALUES: Record<string, fc.Arbitrary<Piece>> = {
  cursor: fc.oneof(
    fc
      .constantFrom<unknown>(
        { after: 'main' },
        { after: 'repo_01J0000000000000000000000' },
        { before: 'sync_01J0000000000000000000000' },
        { before: 'zzzz' },
        { t: 'z'.repeat(32), f: ['k'.repeat(32)] },
        { t: 'k'.repeat(32), f: Array.from({ length: 3000 }, () => 'k'.repeat(32)) },
        { t: 1, f: 'x' },
        { __proto__: null, after: 'a' },
        JSON.parse('{"__proto__":{"after":"x"}}'),
        null,
        [],
        'not json',
        '{"after":',
      )
      .map((v) => ({ text: cursorOf(v) })),
    fc.jsonValue({ maxDepth: 2 }).map((v) => ({ text: cursorOf(v) })),
    urlEdgeString.map((text) => ({ text })),
  ),
  glob: fc.constantFrom('ma*', '*', '?', 'f*t', '**', '*?*?*?*?*?*?*?*?*?*?*?*?zz', '[a-z]', 'a'.repeat(256), 'a'.repeat(257), '\\*', '*'.repeat(300)).map((text) => ({ text })),
  tags: tagFilter,
  metadata: tagFilter,
  change_id: fc.oneof(fc.constantFrom(ref('change'), ref('change2'), ref('root')).map((r) => ({ ref: r.name })), fc.stringMatching(/^[k-z]{32}$/).map((text) => ({ text }))),
  path: fc.constantFrom('README.md', 'docs', 'docs/a.md', '', '/', 'docs/', '../', 'a//b', '.git', 'missing').map((text) => ({ text })),
  bookmark: fc.constantFrom('main', 'feat', 'nope', '').map((text) => ({ text })),
  repo: fc.constantFrom('r1', 'r2', 'nope', '').map((text) => ({ text })),
};
QUERY_VALUES.base_change_id = QUERY_VALUES.change_id!;
QUERY_VALUES.head_change_id = QUERY_VALUES.change_id!;

/** A piece of the request target: encoded from text, a fixture value, or written as it is. */
export type Piece = ({ text: string } | { ref: string } | { raw: string }) & { suffix?: string };

export type TokenPlan = { named: TokenName } | { header: ValueMutation[]; claims: ValueMutation[] };

export interface BodyPlan {
  value: unknown;
  mutations: ValueMutation[];
  text: TextMutation;
  contentType: string | null;
  /** Sizes of the chunks of a chunked body (cycled), or null for a Content-Length. */
  chunks: number[] | null;
  raw?: Uint8Array;
}

export interface RequestPlan {
  route: string;
  method: string;
  prefix: string;
  segments: Array<{ literal: string } | Piece>;
  query: Array<[Piece, Piece | null]>;
  token: TokenPlan;
  accept: string | null;
  idempotencyKey: string | null;
  requestId: string | null;
  body: BodyPlan | null;
}

/**
 * How often each part of a request is mutated, out of 10 (0: always the fixture's valid value).
 * `tokens` chooses between an admin token nearly always and every kind of token.
 */
export interface Profile {
  params: number;
  query: number;
  body: number;
  tokens: 'admin' | 'all';
}

/** `weight` out of 10 for the mutated arbitrary, the rest for the valid one. */
const mix = <T>(weight: number, valid: fc.Arbitrary<T>, mutated: fc.Arbitrary<T>): fc.Arbitrary<T> => {
  if (weight <= 0) return valid;
  if (weight >= 10) return mutated;
  return fc.oneof({ weight: 10 - weight, arbitrary: valid }, { weight, arbitrary: mutated });
};

const mutatedPiece: fc.Arbitrary<Piece> = fc.oneof(
  { weight: 3, arbitrary: urlEdgeString.map((text) => ({ text })) },
  { weight: 3, arbitrary: fc.constantFrom(...RAW_URL_PIECES).map((raw) => ({ raw })) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }).map((text) => ({ text })) },
);

function segmentPlan(param: string, weight: number): fc.Arbitrary<Piece> {
  const own = PARAM_REFS[param];
  if (!own) throw new Error(`the fuzzer has no values for the path parameter {${param}}`);
  const valid = fc.constantFrom(...own).map((r): Piece => ({ ref: r.name }));
  const unknown = fc.constantFrom(...PARAM_UNKNOWN[param]!).map((text): Piece => ({ text }));
  // Any other org is a 403 before the route looks at anything else: rarely worth a request.
  return mix(param === 'org' ? Math.min(weight, 1) : weight, valid, fc.oneof(unknown, mutatedPiece));
}

function validQueryValue(key: string, param: QueryParam): fc.Arbitrary<Piece> {
  if (param.type === 'int') return fc.integer({ min: param.min, max: param.max }).map((n) => ({ text: String(n) }));
  if (param.enum) return fc.constantFrom(...param.enum).map((text) => ({ text }));
  return QUERY_VALUES[key] ?? fc.string({ minLength: param.minLength ?? 0, maxLength: Math.min(param.maxLength ?? 16, 16) }).map((text) => ({ text }));
}

function badQueryValue(param: QueryParam): fc.Arbitrary<Piece> {
  const numbers =
    param.type === 'int'
      ? fc.constantFrom(String(param.min - 1), String(param.max + 1), '1e3', '0x10', '1.5', '-0', '+1', ' 1', '999999999999999', '9'.repeat(40), 'NaN', 'Infinity', '\u0661', '')
      : fc.constantFrom(...(param.enum ?? []).map((v) => v.toUpperCase()), 'x', '');
  const long = param.type === 'string' && param.maxLength !== undefined ? fc.constant('q'.repeat(param.maxLength + 1)) : fc.constant('q'.repeat(32 * 1024));
  return fc.oneof(numbers.map((text) => ({ text })), long.map((text) => ({ text })), mutatedPiece);
}

function queryPlan(route: RouteDef, weight: number): fc.Arbitrary<Array<[Piece, Piece | null]>> {
  const keys = Object.entries(route.query?.keys ?? {});
  const declared = keys.map(([key, param]) =>
    fc.option(
      mix(weight, validQueryValue(key, param), badQueryValue(param)).map((value): [Piece, Piece | null] => [{ text: key }, value]),
      { nil: null, freq: 2 },
    ),
  );
  const extraKey: fc.Arbitrary<Piece> = fc.oneof(
    fc.constantFrom(...keys.map(([k]) => k), ...PROTO_KEYS, 'x', '', 'metadata[team]', 'metadata[__proto__]', 'a[b]').map((text) => ({ text })),
    mutatedPiece,
  );
  const extraValue: fc.Arbitrary<Piece | null> = fc.option(fc.oneof(fc.constantFrom('fuzz', 'x').map((text) => ({ text })), mutatedPiece), { nil: null, freq: 5 });
  const extras = mix(weight, fc.constant([] as Array<[Piece, Piece | null]>), fc.array(fc.tuple(extraKey, extraValue), { minLength: 1, maxLength: 3 }));
  return fc.tuple(fc.tuple(...declared), extras).map(([given, more]) => [...given.filter((p): p is [Piece, Piece | null] => p !== null), ...more]);
}

const validTokenPlan = fc.constantFrom(...VALID_TOKENS).map((named): TokenPlan => ({ named }));
const invalidTokenPlan = fc.constantFrom(...INVALID_TOKENS).map((named): TokenPlan => ({ named }));
const claimsTokenPlan: fc.Arbitrary<TokenPlan> = fc.record({
  header: fc.oneof({ weight: 3, arbitrary: fc.constant([] as ValueMutation[]) }, { weight: 1, arbitrary: fc.array(valueMutation, { minLength: 1, maxLength: 2 }) }),
  claims: fc.array(valueMutation, { minLength: 1, maxLength: 3 }),
});

function tokenPlan(mode: Profile['tokens']): fc.Arbitrary<TokenPlan> {
  const admin = fc.constant<TokenPlan>({ named: 'admin' });
  if (mode === 'admin') return fc.oneof({ weight: 30, arbitrary: admin }, { weight: 1, arbitrary: validTokenPlan }, { weight: 1, arbitrary: invalidTokenPlan });
  return fc.oneof({ weight: 2, arbitrary: admin }, { weight: 3, arbitrary: validTokenPlan }, { weight: 3, arbitrary: invalidTokenPlan }, { weight: 3, arbitrary: claimsTokenPlan });
}

const JSON_TYPES = ['application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json;', 'text/plain', 'application/x-www-form-urlencoded', 'application/octet-stream', 'application/jsonx', 'multipart/form-data; boundary=x', ''];
const contentType = (usual: string): fc.Arbitrary<string | null> =>
  fc.oneof({ weight: 12, arbitrary: fc.constant(usual) }, { weight: 3, arbitrary: fc.constantFrom(...JSON_TYPES, 'application/json') }, { weight: 1, arbitrary: fc.constant(null) });
const framing = fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.array(fc.integer({ min: 1, max: 4096 }), { minLength: 1, maxLength: 4 }) });

function bodyPlan(route: RouteDef, weight: number): fc.Arbitrary<BodyPlan | null> {
  const label = routeLabel(route);
  if (RAW_BODY_ROUTES.has(label)) {
    return fc.record<BodyPlan>({
      value: fc.constant(null),
      mutations: fc.constant([]),
      text: fc.constant({ kind: 'none' }),
      contentType: contentType('application/octet-stream'),
      chunks: framing,
      raw: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.constantFrom(0, 1, 65_536, 1_048_577).map((n) => new Uint8Array(n))),
    });
  }
  const schema = bodySchema(route);
  if (!schema) {
    // A body where none belongs, now and then.
    return fc.oneof(
      { weight: 20, arbitrary: fc.constant(null) },
      {
        weight: 1,
        arbitrary: fc.record<BodyPlan>({
          value: fc.constantFrom<unknown>({}, { x: 1 }, 'x'),
          mutations: fc.constant([]),
          text: fc.constant({ kind: 'none' }),
          contentType: contentType('application/json'),
          chunks: fc.constant(null),
        }),
      },
    );
  }
  const examples = EXAMPLE_BODIES[label] ?? [];
  const value = examples.length ? fc.oneof({ weight: 2, arbitrary: schemaValue(schema, BODY_HINTS) }, { weight: 3, arbitrary: fc.constantFrom(...examples) }) : schemaValue(schema, BODY_HINTS);
  return fc.record<BodyPlan>({
    value,
    mutations: mix(weight, fc.constant([] as ValueMutation[]), fc.array(valueMutation, { minLength: 1, maxLength: 3 })),
    text: mix(Math.min(weight, 5), fc.constant({ kind: 'none' }), textMutation),
    contentType: mix(Math.min(weight, 3), fc.constant<string | null>('application/json'), contentType('application/json')),
    chunks: framing,
  });
}

const acceptHeader = fc.oneof(
  { weight: 8, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.constantFrom('application/json', 'application/octet-stream', 'text/plain', '*/*', 'text/*', 'image/png', 'application/*;q=0', 'text/plain;q=2', ';;;,,,', 'application/octet-stream;q=0.5, */*;q=0.1', 'x'.repeat(5000)) },
);
const idempotencyKey = fc.oneof(
  { weight: 8, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.oneof(fc.nat({ max: 50 }).map((n) => `fuzz-${n}`), fc.constantFrom('k'.repeat(255), 'k'.repeat(256), '\u00e9t\u00e9', '__proto__')) },
);
const requestId = fc.oneof({ weight: 10, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('req-1', 'x'.repeat(201), 'a b', '\u00e9') });

/** Requests for one route under a profile. */
export function requestPlan(route: RouteDef, profile: Profile): fc.Arbitrary<RequestPlan> {
  const parts = route.path.split('/').slice(1);
  const segments = parts.map((part) => {
    // `{repo}.git`: a parameter, then a literal suffix the router strips before matching.
    const param = /^\{(\w+)\}(.*)$/.exec(part);
    if (!param) return fc.constant({ literal: part });
    const [, name, suffix] = param;
    const piece = segmentPlan(name!, profile.params);
    return suffix ? piece.map((p): Piece => ({ ...p, suffix })) : piece;
  });
  return fc.record({
    route: fc.constant(routeLabel(route)),
    method: fc.oneof({ weight: 30, arbitrary: fc.constant(route.method as string) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'OPTIONS', 'HEAD') }),
    // git's smart HTTP is served at the root, the API under either prefix.
    prefix: route.git ? fc.constant('') : fc.oneof({ weight: 5, arbitrary: fc.constant('/v1') }, { weight: 1, arbitrary: fc.constant('/api/v1') }),
    segments: fc.tuple(...segments),
    query: queryPlan(route, profile.query),
    token: tokenPlan(profile.tokens),
    accept: acceptHeader,
    idempotencyKey,
    requestId,
    body: bodyPlan(route, profile.body),
  });
}

/** Requests for every given route, equally often. */
export function requestPlans(routes: readonly RouteDef[], profile: Profile): fc.Arbitrary<RequestPlan> {
  return fc.oneof(...routes.map((route) => requestPlan(route, profile)));
}

// ---- on the wire --------------------------------------------------------------------------

export interface WireRequest {
  method: string;
  /** The request target, bytes as sent. */
  target: Buffer;
  headers: Record<string, string>;
  body?: Buffer;
}

/** Percent-encodes the UTF-8 bytes of `text` (a lone surrogate becomes U+FFFD, as in any client). */
function percentEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function pieceText(piece: { literal: string } | Piece, fixture: FuzzFixture): string {
  if ('literal' in piece) return piece.literal;
  const suffix = piece.suffix ?? '';
  if ('raw' in piece) return piece.raw + suffix;
  if ('ref' in piece) return percentEncode(String(fixture.resolve(new FixtureRef(piece.ref)))) + suffix;
  return percentEncode(piece.text) + suffix;
}

/**
 * Chunks per body at most: each costs the front end some 20 µs, so a megabyte in 9-byte chunks
 * takes seconds without holding anything else up (reported as a cost, not a fault).
 */
const MAX_CHUNKS = 2000;

function chunked(body: Buffer, sizes: number[]): Buffer {
  const parts: Buffer[] = [];
  const least = Math.ceil(body.length / MAX_CHUNKS);
  for (let at = 0, i = 0; at < body.length; i++) {
    const piece = body.subarray(at, at + Math.max(least, sizes[i % sizes.length]!));
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
    at += piece.length;
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

function authorization(plan: TokenPlan, fixture: FuzzFixture): string | undefined {
  if ('named' in plan) return fixture.authorization(plan.named);
  return `Bearer ${fixture.signed(mutateValue(HEADER_TEMPLATE, plan.header), mutateValue(CLAIMS_TEMPLATE, plan.claims))}`;
}

/** The plan's bytes, with the fixture's current values filled in. */
export function toWire(plan: RequestPlan, fixture: FuzzFixture): WireRequest {
  const path = plan.prefix + '/' + plan.segments.map((s) => pieceText(s, fixture)).join('/');
  const query = plan.query.map(([k, v]) => (v === null ? pieceText(k, fixture) : `${pieceText(k, fixture)}=${pieceText(v, fixture)}`)).join('&');
  const headers: Record<string, string> = {};
  const auth = authorization(plan.token, fixture);
  if (auth !== undefined) headers.authorization = auth.slice(0, MAX_AUTHORIZATION_CHARS);
  if (plan.accept !== null) headers.accept = plan.accept;
  if (plan.idempotencyKey !== null) headers['idempotency-key'] = plan.idempotencyKey;
  if (plan.requestId !== null) headers['x-request-id'] = plan.requestId;
  let body: Buffer | undefined;
  if (plan.body) {
    const b = plan.body;
    if (b.contentType !== null) headers['content-type'] = b.contentType;
    body = b.raw ? Buffer.from(b.raw) : mutateText(toJsonText(mutateValue(b.value, b.mutations), (r) => fixture.resolve(r)), b.text).subarray(0, MAX_BODY_BYTES);
    if (b.chunks) {
      headers['transfer-encoding'] = 'chunked';
      body = chunked(body, b.chunks);
    }
  }
  const target = Buffer.from(query ? `${path}?${query}` : path, 'latin1');
  return { method: plan.method, target: target.subarray(0, MAX_TARGET_BYTES), headers, body };
}

/** One line for a report: method, target, headers and the start of the body. */
export function describeWire(wire: WireRequest): string {
  const target = wire.target.toString('latin1');
  const headers = Object.entries(wire.headers).map(([k, v]) => `${k}: ${v.length > 120 ? `${v.slice(0, 120)}…(${v.length})` : v}`);
  const body = wire.body ? ` body(${wire.body.length} bytes): ${JSON.stringify(wire.body.subarray(0, 300).toString('latin1'))}` : '';
  return `${wire.method} ${target.length > 300 ? `${target.slice(0, 300)}…(${target.length})` : target} [${headers.join('; ')}]${body}`;
}
