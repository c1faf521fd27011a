import t, { type Test } from 'tap';
import { statSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { rawRequest } from '../helpers/raw-http.js';
import { openStorage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { withoutShard } from '../storage/storage-helpers.js';
import { MAX_PARAM_BYTES } from '../../src/http/router.js';
import type { RepoRecord } from '../../src/storage/records.js';

/** Repository and org routes (API §1, §3, §4) over HTTP against one real server. */
const ROOT = 'z'.repeat(32);
const REPO_KEYS = ['clone_url', 'created_at', 'default_bookmark', 'head_change_id', 'id', 'name', 'org', 'tags', 'upstream'];
const UPSTREAM_TOKEN = 'ghp_SUPERSECRETupstreamTOKEN0123456789';
const UPSTREAM_PASSWORD = 'pw-Never-Shown-4242';

let s: TestServer;

t.before(async () => {
  // Private upstreams refused here, so the address policy is exercised.
  s = await startTestServer({ env: { REPOHOST_ALLOW_PRIVATE_UPSTREAMS: '0' } });
});
t.teardown(async () => {
  await s.stop();
  s.cleanup();
});

const create = (body: unknown, headers?: Record<string, string>) => s.api('POST', '/acme/repos', { body, headers });
const keysOf = (v: Record<string, unknown>): string[] => Object.keys(v).sort();

function expectError(t: Test, res: { status: number; json: any }, status: number, code: string, message?: RegExp): void {
  t.equal(res.status, status, `status ${status} (${res.json?.error?.message ?? ''})`);
  t.equal(res.json?.error?.code, code);
  t.type(res.json?.error?.message, 'string');
  if (message) t.match(res.json.error.message, message);
  if (status < 500) t.notOk('trace_id' in (res.json?.error ?? {}), 'no trace_id on a 4xx');
}

t.test('whoami - names the org, the signing key, the effective scopes and no restriction', async (t) => {
  const res = await s.api('GET', '/whoami');
  t.equal(res.status, 200);
  t.same(keysOf(res.json), ['org', 'repo_ids', 'scopes', 'signing_key']);
  t.same(keysOf(res.json.org), ['id', 'name', 'slug']);
  t.same(res.json.org.slug, 'acme');
  t.same(res.json.org.name, 'acme inc');
  t.same(res.json.signing_key, { id: s.key.id, name: 'test-admin' });
  t.same(res.json.scopes, ['admin']);
  t.equal(res.json.repo_ids, null);
  t.equal(res.headers.get('content-type'), 'application/json');
});

t.test('base paths - /v1 and /api/v1 serve the same routes', async (t) => {
  const token = await s.token();
  const a = await fetch(`${s.url}/v1/whoami`, { headers: { authorization: `Bearer ${token}` } });
  const b = await fetch(`${s.url}/api/v1/whoami`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(a.status, 200);
  t.equal(b.status, 200);
  t.same(await a.json(), await b.json());
  const created = await fetch(`${s.url}/api/v1/acme/repos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'via-api-prefix' }),
  });
  t.equal(created.status, 201);
  t.equal((await s.api('GET', '/acme/via-api-prefix')).status, 200);
  t.equal((await fetch(`${s.url}/v2/whoami`, { headers: { authorization: `Bearer ${token}` } })).status, 404);
});

t.test('POST /{org}/repos - creates with the exact Repository shape and defaults', async (t) => {
  const res = await create({ name: 'alpha' });
  t.equal(res.status, 201);
  t.same(keysOf(res.json), REPO_KEYS);
  t.match(res.json.id, /^repo_[0-9A-HJKMNP-TV-Z]{26}$/);
  t.equal(res.json.org, 'acme');
  t.equal(res.json.name, 'alpha');
  t.equal(res.json.default_bookmark, 'main');
  t.equal(res.json.head_change_id, ROOT);
  t.equal(res.json.upstream, null);
  t.same(res.json.tags, {});
  t.match(res.json.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  const got = await s.api('GET', '/acme/alpha');
  t.equal(got.status, 200);
  t.same(got.json, res.json, 'GET returns what POST returned');

  // The default bookmark exists from creation, pointing at the virtual root.
  const bm = await s.api('GET', '/acme/alpha/bookmarks/main');
  t.equal(bm.status, 200);
  t.equal(bm.json.name, 'main');
  t.equal(bm.json.change_id, ROOT);
});

t.test('POST /{org}/repos - name omitted or null is generated as repo-<8 letters>; custom default bookmark and tags', async (t) => {
  const a = await create({});
  t.equal(a.status, 201);
  t.match(a.json.name, /^repo-[a-z]{8}$/);
  const b = await create({ name: null, default_bookmark: 'trunk', tags: { Team: 'Infra', env: 'prod' } });
  t.equal(b.status, 201);
  t.match(b.json.name, /^repo-[a-z]{8}$/);
  t.not(a.json.name, b.json.name);
  t.equal(b.json.default_bookmark, 'trunk');
  t.same(b.json.tags, { Team: 'Infra', env: 'prod' });
  // An empty body with no Content-Type is `{}`.
  const c = await s.api('POST', '/acme/repos', { raw: '' });
  t.equal(c.status, 201);
  t.match(c.json.name, /^repo-[a-z]{8}$/);
});

t.test('POST /{org}/repos - every repository name rule is a 400 naming the rule', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['.', /"\." or "\.\."/],
    ['..', /"\." or "\.\."/],
    ['x.git', /\.git/],
    ['X.GIT', /\.git/],
    ['a/b', /single path segment/],
    ['a'.repeat(101), /1 to 100/],
    ['', /1 to 100/],
    ['has space', /letters, digits/],
    ['ümlaut', /letters, digits/],
    ['repos', /reserved/],
    ['REPOS', /reserved/],
    ['api-keys', /reserved/],
    ['webhook-targets', /reserved/],
    ['sync-runs', /reserved/],
  ];
  for (const [name, rule] of cases) {
    const res = await create({ name });
    expectError(t, res, 400, 'INVALID_REQUEST', rule);
  }
  const longest = await create({ name: 'b'.repeat(100) });
  t.equal(longest.status, 201, 'exactly 100 characters is allowed');
  const dotted = await create({ name: 'x.git.y_z-1' });
  t.equal(dotted.status, 201, '".git" inside a name is fine');
});

t.test('repository names in the path - invalid names are 400, lookups are case-insensitive', async (t) => {
  const token = await s.token();
  const auth = { authorization: `Bearer ${token}` };
  for (const path of ['/v1/acme/a%2Fb', '/v1/acme/..', '/v1/acme/.', '/v1/acme/x.git', '/v1/acme/X.GIT', '/v1/acme/%2E%2E']) {
    const res = await rawRequest(s.port, { method: 'GET', path, headers: auth });
    t.equal(res.status, 400, `${path} is a bad path`);
    t.equal(JSON.parse(res.body).error.code, 'INVALID_REQUEST');
  }
  const bad = await rawRequest(s.port, { method: 'GET', path: '/v1/acme/%zz', headers: auth });
  t.equal(bad.status, 400, 'malformed percent-encoding');
  const missing = await s.api('GET', '/acme/no-such-repo');
  expectError(t, missing, 404, 'REPO_NOT_FOUND');
  const made = await create({ name: 'MixedCase' });
  t.equal(made.status, 201);
  const lower = await s.api('GET', '/acme/mixedcase');
  t.equal(lower.status, 200);
  t.equal(lower.json.name, 'MixedCase');
  const encoded = await s.api('GET', '/acme/Mixed%43ase');
  t.equal(encoded.status, 200, 'segments are percent-decoded');
});

t.test('POST /{org}/repos - names are unique case-insensitively and keep their original casing', async (t) => {
  const first = await create({ name: 'Foo' });
  t.equal(first.status, 201);
  for (const name of ['foo', 'FOO', 'Foo']) {
    const dup = await create({ name });
    expectError(t, dup, 409, 'REPO_EXISTS', /Foo/);
  }
  const got = await s.api('GET', '/acme/fOO');
  t.equal(got.json.name, 'Foo');
});

t.test('request bodies - malformed JSON, wrong types, unknown fields, $ tags, sizes and content types are 400', async (t) => {
  const bad = async (raw: string, rule?: RegExp, contentType = 'application/json'): Promise<void> => {
    const res = await s.api('POST', '/acme/repos', { raw, headers: { 'content-type': contentType } });
    expectError(t, res, 400, 'INVALID_REQUEST', rule);
  };
  await bad('{"name": "x"', /malformed JSON/);
  await bad('not json', /malformed JSON/);
  await bad('[]');
  await bad('"a string"');
  await bad('{"name": 5}', /name/);
  await bad('{"tags": ["a"]}', /tags/);
  await bad('{"tags": {"k": 1}}', /tags/);
  await bad('{"default_bookmark": true}', /default_bookmark/);
  await bad('{"nmae": "typo"}', /unknown field "nmae"/);
  await bad('{"upstream": {"url": "https://93.184.215.14/r.git", "extra": 1}}');
  await bad('{"tags": {"$owner": "me"}}', /\$/);
  await bad(JSON.stringify({ tags: { ['k'.repeat(65)]: 'v' } }));
  await bad(JSON.stringify({ tags: { k: 'v'.repeat(257) } }));
  await bad('{"default_bookmark": "bad..name"}', /bookmark/);
  await bad('{"default_bookmark": "-x"}', /bookmark/);
  await bad('{"name": "ok-name"}', /Content-Type/, 'text/plain');
  await bad('{"name": "ok-name"}', /Content-Type/, 'application/x-www-form-urlencoded');
  const ok = await s.api('POST', '/acme/repos', { raw: '{"name":"json-with-charset"}', headers: { 'content-type': 'application/json; charset=utf-8' } });
  t.equal(ok.status, 201);
  const edge = await create({ tags: { ['k'.repeat(64)]: 'v'.repeat(256) } });
  t.equal(edge.status, 201, 'tag key of 64 and value of 256 characters are allowed');
});

t.test('request bodies - over 1 MiB is 413, decided before the body is read (with and without Content-Length)', async (t) => {
  const token = await s.token();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const declared = await rawRequest(s.port, { method: 'POST', path: '/v1/acme/repos', headers, declared: { length: 2 * 1024 * 1024, partial: 1024 } });
  t.equal(declared.status, 413, 'a declared length over the limit is refused after 1 KiB of body');
  t.equal(JSON.parse(declared.body).error.code, 'PAYLOAD_TOO_LARGE');
  const streamed = await rawRequest(s.port, { method: 'POST', path: '/v1/acme/repos', headers, stream: { count: 64, size: 64 * 1024 } });
  t.equal(streamed.status, 413, 'a chunked body is refused once it passes the limit');
  t.equal(JSON.parse(streamed.body).error.code, 'PAYLOAD_TOO_LARGE');
  t.ok(streamed.sentBeforeResponse < 4 * 1024 * 1024, `answered after ${streamed.sentBeforeResponse} of 4 MiB`);
  const fitting = { name: 'padded', tags: { pad: 'x'.repeat(200) } };
  const small = await rawRequest(s.port, { method: 'POST', path: '/v1/acme/repos', headers, body: JSON.stringify(fitting) });
  t.equal(small.status, 201);
  const chunkedOk = await rawRequest(s.port, { method: 'POST', path: '/v1/acme/repos', headers: { ...headers, 'transfer-encoding': 'chunked' }, body: `13\r\n{"name":"chunked1"}\r\n0\r\n\r\n` });
  t.equal(chunkedOk.status, 201, 'a small chunked body is read');
});

t.test('routing - unknown route 404, wrong method 405 with Allow, healthz', async (t) => {
  expectError(t, await s.api('GET', '/acme/alpha/nothing/here/at/all'), 404, 'NOT_FOUND');
  const root = await fetch(`${s.url}/`);
  t.equal(root.status, 404);
  const put = await s.api('PUT', '/acme/repos', { body: {} });
  expectError(t, put, 405, 'METHOD_NOT_ALLOWED');
  t.same(put.headers.get('allow')!.split(', ').sort(), ['GET', 'POST']);
  const delList = await s.api('DELETE', '/acme/repos');
  expectError(t, delList, 405, 'METHOD_NOT_ALLOWED');
  t.same(delList.headers.get('allow')!.split(', ').sort(), ['GET', 'POST'], 'a reserved name is never taken for a repository');
  const patchRuns = await s.api('PATCH', '/acme/sync-runs', { body: {} });
  t.equal(patchRuns.status, 405);
  t.equal(patchRuns.headers.get('allow'), 'GET');
  const del = await s.api('DELETE', '/acme/repos/list');
  expectError(t, del, 405, 'METHOD_NOT_ALLOWED');
  t.equal(del.headers.get('allow'), 'GET');
  const who = await s.api('POST', '/whoami', { body: {} });
  t.equal(who.status, 405);
  t.equal(who.headers.get('allow'), 'GET');
  const repo = await s.api('PUT', '/acme/alpha', { body: {} });
  t.equal(repo.status, 405);
  t.same(repo.headers.get('allow')!.split(', ').sort(), ['DELETE', 'GET', 'PATCH']);
  // API-key management was removed in 0.48.0: the brief's PATCH /{org}/api-keys/{id} is not served.
  expectError(t, await s.api('PATCH', `/acme/api-keys/${s.key.id}`, { body: { tags: { a: 'b' } } }), 404, 'NOT_FOUND');
  expectError(t, await s.api('GET', '/acme/api-keys'), 400, 'INVALID_REQUEST', /reserved/);
  const health = await fetch(`${s.url}/healthz`, { headers: { 'x-request-id': 'probe-1' } });
  t.equal(health.status, 200);
  t.equal(await health.text(), 'ok');
  t.equal(health.headers.get('x-request-id'), 'probe-1');
  const postHealth = await fetch(`${s.url}/healthz`, { method: 'POST' });
  t.equal(postHealth.status, 405);
  t.equal(postHealth.headers.get('allow'), 'GET');
  t.match(postHealth.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
  t.equal((await fetch(`${s.url}/metrics`)).status, 404, 'metrics are not on the API port');
});

t.test('routing - a path segment over 1 KiB is a 400 wherever it stands, never a 500 from the key it would make', async (t) => {
  t.equal((await create({ name: 'long-params' })).status, 201);
  const long = 'a'.repeat(MAX_PARAM_BYTES + 1);
  const wide = '\u00e9'.repeat(MAX_PARAM_BYTES / 2 + 1);
  for (const [method, path, body] of [
    ['GET', `/acme/webhook-targets/${long}`],
    ['PATCH', `/acme/webhook-targets/${long}`, { name: 'x' }],
    ['POST', `/acme/webhook-targets/${long}/rotate-secret`, {}],
    ['POST', `/acme/webhook-targets/wht_x/deliveries/${long}/redeliver`, {}],
    ['GET', `/acme/long-params/upstream/syncs/${long}`],
    ['GET', `/acme/long-params/bookmarks/${long}`],
    ['DELETE', `/acme/long-params/bookmarks/${wide}`],
  ] as const) {
    expectError(t, await s.api(method, path.replace(wide, encodeURIComponent(wide)), { body }), 400, 'INVALID_REQUEST', /path segment is longer than 1024 bytes/);
  }
  const limit = 'a'.repeat(MAX_PARAM_BYTES);
  expectError(t, await s.api('GET', `/acme/webhook-targets/${limit}`), 404, 'NOT_FOUND', /webhook target/);
  expectError(t, await s.api('GET', `/acme/long-params/bookmarks/${limit}`), 404, 'BRANCH_NOT_FOUND');
});

t.test('request ids - a valid X-Request-Id is echoed, an invalid one replaced', async (t) => {
  const echoed = await s.api('GET', '/whoami', { headers: { 'x-request-id': 'req-123.abc:9' } });
  t.equal(echoed.headers.get('x-request-id'), 'req-123.abc:9');
  const replaced = await s.api('GET', '/whoami', { headers: { 'x-request-id': 'x'.repeat(300) } });
  t.match(replaced.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
  const onError = await s.api('GET', '/acme/missing-repo', { headers: { 'x-request-id': 'err-1' } });
  t.equal(onError.headers.get('x-request-id'), 'err-1', 'errors carry it too');
  const generated = await s.api('GET', '/whoami');
  t.match(generated.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
});

t.test('GET /{org} - org shape with num_repos', async (t) => {
  const res = await s.api('GET', '/acme');
  t.equal(res.status, 200);
  t.same(keysOf(res.json), ['created_at', 'id', 'name', 'num_repos', 'slug']);
  t.equal(res.json.slug, 'acme');
  const list = await s.api('GET', '/acme/repos/list?pageSize=1');
  t.equal(res.json.num_repos, list.json.total);
  await create({ name: 'count-me' });
  t.equal((await s.api('GET', '/acme')).json.num_repos, res.json.num_repos + 1);
});

t.test('GET /{org}/repos - cursor pages, newest first, stable across inserts; bad cursors and limits are 400', async (t) => {
  const org = 'pages';
  s.createOrg(org);
  const key = s.createKey({ scopes: ['admin'], org });
  const token = await s.token({ key, issuer: org });
  const names: string[] = [];
  for (let i = 0; i < 7; i++) {
    const res = await s.api('POST', `/${org}/repos`, { token, body: { name: `p${i}` } });
    t.equal(res.status, 201);
    names.push(`p${i}`);
  }
  const first = await s.api('GET', `/${org}/repos?limit=3`, { token });
  t.equal(first.status, 200);
  t.same(keysOf(first.json), ['has_more', 'next_cursor', 'repos']);
  t.same(first.json.repos.map((r: { name: string }) => r.name), ['p6', 'p5', 'p4']);
  t.same(keysOf(first.json.repos[0]), REPO_KEYS);
  t.equal(first.json.has_more, true);
  t.type(first.json.next_cursor, 'string');
  // A repository created between pages appears on no later page and shifts nothing.
  t.equal((await s.api('POST', `/${org}/repos`, { token, body: { name: 'late' } })).status, 201);
  const second = await s.api('GET', `/${org}/repos?limit=3&cursor=${encodeURIComponent(first.json.next_cursor)}`, { token });
  t.same(second.json.repos.map((r: { name: string }) => r.name), ['p3', 'p2', 'p1']);
  const third = await s.api('GET', `/${org}/repos?limit=3&cursor=${encodeURIComponent(second.json.next_cursor)}`, { token });
  t.same(third.json.repos.map((r: { name: string }) => r.name), ['p0']);
  t.equal(third.json.has_more, false);
  t.equal(third.json.next_cursor, null);
  const all = await s.api('GET', `/${org}/repos`, { token });
  t.equal(all.json.repos.length, 8, 'default limit 50 covers everything');
  t.equal(all.json.repos[0].name, 'late');
  const exact = await s.api('GET', `/${org}/repos?limit=8`, { token });
  t.equal(exact.json.has_more, false, 'a page that ends exactly at the end has no more');
  t.equal(exact.json.next_cursor, null);

  const badCursors = ['garbage!!', Buffer.from('[1,2]').toString('base64url'), Buffer.from('{"after":"nope"}').toString('base64url'), Buffer.from('{"after":5}').toString('base64url')];
  for (const cursor of badCursors) expectError(t, await s.api('GET', `/${org}/repos?cursor=${encodeURIComponent(cursor)}`, { token }), 400, 'INVALID_REQUEST', /cursor/);
  for (const limit of ['0', '101', '-1', 'abc', '1.5']) expectError(t, await s.api('GET', `/${org}/repos?limit=${limit}`, { token }), 400, 'INVALID_REQUEST', /limit/);
  t.equal((await s.api('GET', `/${org}/repos?limit=100`, { token })).status, 200);
  expectError(t, await s.api('GET', `/${org}/repos?page=2`, { token }), 400, 'INVALID_REQUEST', /unknown query parameter "page"/);
  expectError(t, await s.api('GET', `/${org}/repos?limit=1&limit=2`, { token }), 400, 'INVALID_REQUEST', /more than once/);
  expectError(t, await s.api('GET', `/${org}/repos?limit=%zz`, { token }), 400, 'INVALID_REQUEST');
});

t.test('cursors - a position longer than any name or id is a malformed cursor on every list, never a 500', async (t) => {
  t.equal((await create({ name: 'long-cursors' })).status, 201);
  const change = await s.api('POST', '/acme/long-cursors/apply-ops', { body: { base_change_id: ROOT, ops: [] } });
  t.equal(change.status, 201);
  const target = await s.api('POST', '/acme/webhook-targets', { body: { url: 'http://127.0.0.1:9/hook' } });
  t.equal(target.status, 201);
  const cursor = (position: Record<string, unknown>): string => Buffer.from(JSON.stringify(position)).toString('base64url');
  const long = 'a'.repeat(5000);
  for (const path of [
    `/acme/long-cursors/bookmarks?cursor=${cursor({ after: long })}`,
    `/acme/long-cursors/upstream/syncs?cursor=${cursor({ before: long })}`,
    `/acme/sync-runs?cursor=${cursor({ before: long })}`,
    `/acme/webhook-targets?cursor=${cursor({ before: long })}`,
    `/acme/webhook-targets/${target.json.id}/deliveries?cursor=${cursor({ before: long })}`,
    `/acme/long-cursors/changes/${change.json.change.id}/evolution?cursor=${cursor({ before: long })}`,
  ]) {
    expectError(t, await s.api('GET', path), 400, 'INVALID_REQUEST', /cursor/);
  }
  t.equal((await s.api('GET', `/acme/sync-runs?cursor=${cursor({ before: 'a'.repeat(1024) })}`)).status, 200, 'a position of 1024 bytes is still one');
  for (const path of ['/acme/webhook-targets', '/acme/sync-runs', '/acme/long-cursors/bookmarks']) {
    // 400 characters, 1,200 bytes: counted as LMDB counts a key.
    expectError(t, await s.api('GET', `${path}?cursor=${cursor({ before: '€'.repeat(400), after: '€'.repeat(400) })}`), 400, 'INVALID_REQUEST', /cursor/);
  }
  t.equal((await s.api('DELETE', `/acme/webhook-targets/${target.json.id}`)).status, 200);
});

t.test('GET /{org}/repos?tags= - every operator of the JSON filter, case-insensitive', async (t) => {
  const org = 'tagged';
  s.createOrg(org);
  const key = s.createKey({ scopes: ['admin'], org });
  const token = await s.token({ key, issuer: org });
  const repos: Record<string, Record<string, string>> = {
    web: { team: 'Infra', env: 'prod', lang: 'TypeScript' },
    api: { team: 'infra', env: 'staging', lang: 'Go' },
    docs: { team: 'docs', env: 'prod' },
    bare: {},
  };
  for (const [name, tags] of Object.entries(repos)) t.equal((await s.api('POST', `/${org}/repos`, { token, body: { name, tags } })).status, 201);
  const names = async (filter: unknown): Promise<string[]> => {
    const res = await s.api('GET', `/${org}/repos?tags=${encodeURIComponent(JSON.stringify(filter))}`, { token });
    t.equal(res.status, 200, JSON.stringify(filter));
    return res.json.repos.map((r: { name: string }) => r.name).sort();
  };
  t.same(await names({ team: 'infra' }), ['api', 'web'], 'equals, case-insensitive value');
  t.same(await names({ TEAM: 'INFRA' }), ['api', 'web'], 'case-insensitive key');
  t.same(await names({ env: ['staging', 'dev'] }), ['api'], 'array = in');
  t.same(await names({ env: { $eq: 'PROD' } }), ['docs', 'web']);
  t.same(await names({ env: { $EQ: 'prod' } }), ['docs', 'web'], 'operators case-insensitive');
  t.same(await names({ lang: { $in: ['go', 'rust'] } }), ['api']);
  t.same(await names({ lang: { $contains: 'script' } }), ['web']);
  t.same(await names({ lang: { $starts_with: 'ty' } }), ['web']);
  t.same(await names({ lang: { $ends_with: 'O' } }), ['api']);
  t.same(await names({ lang: { $exists: true } }), ['api', 'web']);
  t.same(await names({ lang: { $exists: false } }), ['bare', 'docs']);
  t.same(await names({ team: 'infra', env: 'prod' }), ['web'], 'several keys are ANDed');
  t.same(await names({ $and: [{ team: 'infra' }, { lang: 'go' }] }), ['api']);
  t.same(await names({ $or: [{ env: 'staging' }, { team: 'docs' }] }), ['api', 'docs']);
  t.same(await names({ $not: { env: 'prod' } }), ['api', 'bare']);
  t.same(await names({ $or: [{ $not: { team: { $exists: true } } }, { $and: [{ env: 'prod' }, { team: 'docs' }] }] }), ['bare', 'docs']);
  t.same(await names({}), ['api', 'bare', 'docs', 'web'], 'empty filter matches all');

  const bad = async (raw: string, rule?: RegExp): Promise<void> => {
    expectError(t, await s.api('GET', `/${org}/repos?tags=${encodeURIComponent(raw)}`, { token }), 400, 'INVALID_REQUEST', rule);
  };
  await bad('team:infra', /JSON/);
  await bad('team=infra,env=prod', /JSON/);
  await bad('["a"]');
  await bad('{"env":{"$regex":"p.*"}}', /unknown filter operator "\$regex"/);
  await bad('{"$nor":[{"a":"b"}]}', /unknown filter operator/);
  await bad('{"env":{"$eq":"a","$in":["b"]}}', /exactly one operator/);
  await bad('{"env":{"$exists":"yes"}}', /boolean/);
  await bad('{"env":{"$in":"prod"}}', /array of strings/);
  await bad('{"env":5}');
  await bad('{"$and":[]}');
  let deep: Record<string, unknown> = { a: 'b' };
  for (let i = 0; i < 8; i++) deep = { $not: deep };
  await bad(JSON.stringify(deep), /deeper/);
  const wide = { $or: Array.from({ length: 101 }, (_, i) => ({ [`k${i}`]: 'v' })) };
  await bad(JSON.stringify(wide), /clauses/);
});

t.test('GET /{org}/repos/list - page-numbered list with sorting and the metadata filter', async (t) => {
  const org = 'listed';
  s.createOrg(org);
  const key = s.createKey({ scopes: ['admin'], org });
  const token = await s.token({ key, issuer: org });
  for (const [name, tags] of [['charlie', { k: 'x' }], ['Alpha', { k: 'y' }], ['bravo', {}]] as const) {
    t.equal((await s.api('POST', `/${org}/repos`, { token, body: { name, tags } })).status, 201);
  }
  t.equal((await s.api('POST', `/${org}/repos`, { token, body: { name: 'mirrored', upstream: { url: 'https://93.184.215.14/m.git' } } })).status, 201);
  const def = await s.api('GET', `/${org}/repos/list`, { token });
  t.equal(def.status, 200);
  t.same(keysOf(def.json), ['page', 'page_size', 'repos', 'total', 'total_pages']);
  t.same({ page: def.json.page, page_size: def.json.page_size, total: def.json.total, total_pages: def.json.total_pages }, { page: 1, page_size: 25, total: 4, total_pages: 1 });
  t.same(def.json.repos.map((r: { name: string }) => r.name), ['mirrored', 'bravo', 'Alpha', 'charlie'], 'created_at desc by default');
  t.same(keysOf(def.json.repos[0]), ['created_at', 'default_branch', 'id', 'metadata', 'name', 'upstream']);
  t.same(def.json.repos[0].upstream, { uri: 'https://93.184.215.14/m.git', status: 'never' });
  t.equal(def.json.repos[1].upstream, null);
  t.same(def.json.repos[2].metadata, { k: 'y' });
  t.equal(def.json.repos[2].default_branch, 'main');
  const byName = await s.api('GET', `/${org}/repos/list?sortBy=name&sortOrder=asc&pageSize=2`, { token });
  t.same(byName.json.repos.map((r: { name: string }) => r.name), ['Alpha', 'bravo'], 'names compare case-insensitively');
  t.equal(byName.json.total_pages, 2);
  const page2 = await s.api('GET', `/${org}/repos/list?sortBy=name&sortOrder=asc&pageSize=2&page=2`, { token });
  t.same(page2.json.repos.map((r: { name: string }) => r.name), ['charlie', 'mirrored']);
  const past = await s.api('GET', `/${org}/repos/list?page=9`, { token });
  t.equal(past.status, 200);
  t.same(past.json.repos, [], 'a page past the end is empty');
  const asc = await s.api('GET', `/${org}/repos/list?sortOrder=asc`, { token });
  t.equal(asc.json.repos[0].name, 'charlie');
  const filtered = await s.api('GET', `/${org}/repos/list?metadata=${encodeURIComponent('{"k":{"$in":["X","z"]}}')}`, { token });
  t.same(filtered.json.repos.map((r: { name: string }) => r.name), ['charlie']);
  t.equal(filtered.json.total, 1);
  for (const q of ['pageSize=0', 'pageSize=101', 'page=0', 'sortBy=size', 'sortOrder=up', 'metadata=k:x', 'limit=5']) {
    expectError(t, await s.api('GET', `/${org}/repos/list?${q}`, { token }), 400, 'INVALID_REQUEST');
  }
});

t.test('PATCH /{org}/{repo} - rename, tags merge, default bookmark, errors', async (t) => {
  t.equal((await create({ name: 'patch-me', tags: { a: '1', b: '2' } })).status, 201);
  t.equal((await create({ name: 'Taken' })).status, 201);
  const renamed = await s.api('PATCH', '/acme/patch-me', { body: { name: 'Patched' } });
  t.equal(renamed.status, 200);
  t.same(keysOf(renamed.json), REPO_KEYS);
  t.equal(renamed.json.name, 'Patched');
  expectError(t, await s.api('GET', '/acme/patch-me'), 404, 'REPO_NOT_FOUND');
  t.equal((await s.api('GET', '/acme/patched')).json.id, renamed.json.id);
  const recased = await s.api('PATCH', '/acme/patched', { body: { name: 'PATCHED' } });
  t.equal(recased.status, 200, 'a repository may change the casing of its own name');
  t.equal(recased.json.name, 'PATCHED');
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { name: 'taken' } }), 409, 'REPO_EXISTS');
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { name: 'bad.git' } }), 400, 'INVALID_REQUEST', /\.git/);
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { name: 'repos' } }), 400, 'INVALID_REQUEST', /reserved/);

  const tagged = await s.api('PATCH', '/acme/patched', { body: { tags: { b: null, c: '3', a: 'one' } } });
  t.equal(tagged.status, 200);
  t.same(tagged.json.tags, { a: 'one', c: '3' }, 'tags merge; null removes');
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { tags: { $x: 'y' } } }), 400, 'INVALID_REQUEST', /\$/);
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { tags: { x: 5 } } }), 400, 'INVALID_REQUEST');
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { default_bookmark: 'nope' } }), 400, 'INVALID_REQUEST', /existing bookmark/);
  t.equal((await s.api('PATCH', '/acme/patched', { body: { default_bookmark: 'main' } })).status, 200);
  expectError(t, await s.api('PATCH', '/acme/patched', { body: { colour: 'red' } }), 400, 'INVALID_REQUEST', /unknown field "colour"/);
  expectError(t, await s.api('PATCH', '/acme/patched', { raw: '{', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_REQUEST');
  expectError(t, await s.api('PATCH', '/acme/not-there', { body: { name: 'x' } }), 404, 'REPO_NOT_FOUND');
  const noop = await s.api('PATCH', '/acme/patched', { body: {} });
  t.equal(noop.status, 200);
  t.equal(noop.json.name, 'PATCHED');
});

t.test('GET /{org}/{repo} - a repository read again after each kind of change shows that change', async (t) => {
  t.equal((await create({ name: 'reread', tags: { a: '1' } })).status, 201);
  const read = async (name = 'reread') => {
    const first = await s.api('GET', `/acme/${name}`);
    const again = await s.api('GET', `/acme/${name}`);
    t.same(again.json, first.json, 'two reads in a row agree');
    return first.json;
  };
  t.equal((await read()).head_change_id, ROOT);
  const write = await s.api('POST', '/acme/reread/apply-ops', {
    body: { base_change_id: ROOT, bookmarks: [{ name: 'main', create: true }], ops: [{ op: 'write', path: 'a.txt', content: 'a' }] },
  });
  t.equal(write.status, 201);
  t.equal((await read()).head_change_id, write.json.change.id, 'moving the default bookmark moves the head');
  t.equal((await s.api('PATCH', '/acme/reread', { body: { tags: { b: '2' } } })).status, 200);
  t.same((await read()).tags, { a: '1', b: '2' }, 'new tags');
  const side = await s.api('POST', '/acme/reread/apply-ops', {
    body: { base_change_id: ROOT, bookmarks: [{ name: 'side', create: true }], ops: [{ op: 'write', path: 'b.txt', content: 'b' }] },
  });
  t.equal((await s.api('PATCH', '/acme/reread', { body: { default_bookmark: 'side' } })).status, 200);
  const moved = await read();
  t.equal(moved.default_bookmark, 'side');
  t.equal(moved.head_change_id, side.json.change.id, 'another default bookmark, its head');
  t.equal((await s.api('PATCH', '/acme/reread', { body: { name: 'reread-2' } })).status, 200);
  t.equal((await read('reread-2')).clone_url.endsWith('/acme/reread-2.git'), true, 'renamed: the clone URL follows');
});

t.test('upstream - validated, credential sealed at rest and never returned or logged', async (t) => {
  const refused: Array<[string, RegExp]> = [
    ['https://user:pass@93.184.215.14/r.git', /credentials/],
    ['ftp://93.184.215.14/r.git', /http or https/],
    ['not a url', /absolute/],
    ['http://127.0.0.1:9/r.git', /private or loopback/],
    ['http://10.1.2.3/r.git', /private or loopback/],
    ['http://169.254.169.254/latest', /link-local or metadata/],
    ['http://[::1]/r.git', /private or loopback/],
    ['http://[::]:9/r.git', /private or loopback/],
    ['http://0.0.0.0:9/r.git', /private or loopback/],
    ['http://[::ffff:127.0.0.1]:9/r.git', /special-purpose/],
    ['http://[::ffff:7f00:1]:9/r.git', /special-purpose/],
    ['http://[64:ff9b::7f00:1]/r.git', /special-purpose/],
    ['http://[2002:7f00:1::]/r.git', /special-purpose/],
    ['http://[fec0::1]/r.git', /special-purpose/],
    ['http://198.18.0.1/r.git', /special-purpose/],
    ['http://240.0.0.1/r.git', /special-purpose/],
    ['http://255.255.255.255/r.git', /special-purpose/],
    ['http://192.0.0.8/r.git', /special-purpose/],
  ];
  for (const [url, rule] of refused) {
    expectError(t, await create({ name: 'up-bad', upstream: { url } }), 400, 'INVALID_REQUEST', rule);
  }
  expectError(t, await create({ name: 'up-bad', upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token' } } }), 400, 'INVALID_REQUEST');
  expectError(t, await create({ name: 'up-bad', upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'ssh', key: 'x' } } }), 400, 'INVALID_REQUEST');

  const made = await create({ name: 'mirror', upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token', token: UPSTREAM_TOKEN } } });
  t.equal(made.status, 201);
  t.same(made.json.upstream, { url: 'https://93.184.215.14/r.git', auth_kind: 'token', latest_sync: null });
  const kept = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.14/other.git' } } });
  t.same(kept.json.upstream, { url: 'https://93.184.215.14/other.git', auth_kind: 'token', latest_sync: null }, 'omitted auth keeps the credential for the same origin');
  for (const url of ['https://93.184.215.15/other.git', 'http://93.184.215.14/other.git', 'https://93.184.215.14:8443/other.git']) {
    await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token', token: UPSTREAM_TOKEN } } } });
    const moved = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url } } });
    t.same(moved.json.upstream, { url, auth_kind: null, latest_sync: null }, `a new origin without auth drops the credential: ${url}`);
  }
  const withAuth = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.15/r.git', auth: { kind: 'token', token: UPSTREAM_TOKEN } } } });
  t.equal(withAuth.json.upstream.auth_kind, 'token', 'a new origin with auth in the same request takes it');
  const swapped = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.15/r.git', auth: { kind: 'username_password', username: 'bot', password: UPSTREAM_PASSWORD } } } });
  t.equal(swapped.json.upstream.auth_kind, 'username_password');
  expectError(t, await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://bot:x@93.184.215.15/r.git' } } }), 400, 'INVALID_REQUEST', /credentials/);
  const cleared = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.15/r.git', auth: null } } });
  t.equal(cleared.json.upstream.auth_kind, null, 'auth: null clears the credential');
  const again = await s.api('PATCH', '/acme/mirror', { body: { upstream: { url: 'https://93.184.215.15/r.git', auth: { kind: 'token', token: UPSTREAM_TOKEN, token_username: 'oauth2' } } } });
  t.equal(again.json.upstream.auth_kind, 'token');
  const removed = await create({ name: 'mirror-2', upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token', token: UPSTREAM_TOKEN } } });
  const noUpstream = await s.api('PATCH', '/acme/mirror-2', { body: { upstream: null } });
  t.equal(noUpstream.json.upstream, null, 'upstream: null removes it');

  const texts = [made.text, kept.text, swapped.text, cleared.text, again.text, removed.text, (await s.api('GET', '/acme/mirror')).text, (await s.api('GET', '/acme/repos?limit=100')).text, (await s.api('GET', '/acme/repos/list?pageSize=100')).text];
  for (const text of texts) {
    t.notMatch(text, UPSTREAM_TOKEN);
    t.notMatch(text, UPSTREAM_PASSWORD);
    t.notMatch(text, 'sealed');
  }

  const storage = openStorage(s.dataDir);
  try {
    const record = storage.meta.get(K.repo(again.json.id)) as RepoRecord;
    t.equal(record.upstream?.auth_kind, 'token');
    t.match(record.upstream?.sealed_auth, /^v1\./, 'stored sealed');
    t.notMatch(record.upstream?.sealed_auth ?? '', UPSTREAM_TOKEN);
  } finally {
    await storage.close();
  }
  const db = readFileSync(join(s.dataDir, 'db', 'data.mdb'));
  t.equal(db.indexOf(UPSTREAM_TOKEN), -1, 'the token is nowhere in the database file');
  t.equal(db.indexOf(UPSTREAM_PASSWORD), -1, 'the password is nowhere in the database file');
  t.equal(statSync(join(s.dataDir, 'secret.key')).mode & 0o777, 0o600, 'secret.key is mode 0600');
  const logs = s.logs.join('\n');
  t.notMatch(logs, UPSTREAM_TOKEN, 'not in the server log');
  t.notMatch(logs, UPSTREAM_PASSWORD);
  t.ok(readdirSync(s.dataDir).includes('secret.key'));
});

t.test('DELETE /{org}/{repo} - removes the repository, its name and its data; the name is free again', async (t) => {
  const made = await create({ name: 'doomed' });
  t.equal(made.status, 201);
  const del = await s.api('DELETE', '/acme/doomed');
  t.equal(del.status, 200);
  t.same(del.json, { success: true });
  expectError(t, await s.api('GET', '/acme/doomed'), 404, 'REPO_NOT_FOUND');
  expectError(t, await s.api('DELETE', '/acme/doomed'), 404, 'REPO_NOT_FOUND');
  const list = await s.api('GET', '/acme/repos?limit=100');
  t.notOk(list.json.repos.some((r: { id: string }) => r.id === made.json.id));
  const reborn = await create({ name: 'DOOMED' });
  t.equal(reborn.status, 201);
  t.not(reborn.json.id, made.json.id);
  const storage = openStorage(s.dataDir);
  try {
    const left = [...storage.meta.getKeys(Ranges.repoOwned(made.json.id))];
    t.same(left.map((k) => withoutShard(k as unknown[])[2]), ['op'], 'only the deletion operation remains in the range');
    t.equal(storage.meta.get(K.repo(made.json.id)), undefined);
  } finally {
    await storage.close();
  }
});

t.test('client mistakes never produce a 5xx', async (t) => {
  const token = await s.token();
  const auth = { authorization: `Bearer ${token}` };
  const attempts: Array<Parameters<typeof rawRequest>[1]> = [
    { method: 'POST', path: '/v1/acme/repos', headers: { ...auth, 'content-type': 'application/json' }, body: Buffer.from([0xff, 0xfe, 0x00, 0x7b]) },
    { method: 'POST', path: '/v1/acme/repos', headers: { ...auth, 'content-type': 'application/json' }, body: '['.repeat(100000) },
    { method: 'POST', path: '/v1/acme/repos', headers: { ...auth, 'content-type': 'application/json' }, body: '{"name":"\\ud800"}' },
    { method: 'GET', path: '/v1/acme/repos?tags=%7B%22a%22%3A%7B%22%24in%22%3A%5B1%5D%7D%7D', headers: auth },
    { method: 'GET', path: '/v1/acme/repos?cursor=%F0%9F%98%80', headers: auth },
    { method: 'GET', path: '/v1/%00/repos', headers: auth },
    { method: 'GET', path: '/v1/acme/repos/list?page=99999999999999999999', headers: auth },
    { method: 'PATCH', path: '/v1/acme/alpha', headers: { ...auth, 'content-type': 'application/json' }, body: '{"upstream":{"url":"https://[zz]/"}}' },
    { method: 'PATCH', path: '/v1/acme/alpha', headers: { ...auth, 'content-type': 'application/json' }, body: '{"upstream":{"url":"https://no-such-host.invalid/r.git"}}' },
    { method: 'DELETE', path: '/v1/acme/never-made', headers: { ...auth, 'content-type': 'application/json' }, body: 'garbage' },
    { method: 'OPTIONS', path: '/v1/acme/repos', headers: auth },
    { method: 'GET', path: '/v1/acme/repos', headers: { authorization: 'Bearer ' + 'a.'.repeat(5000) } },
    { method: 'GET', path: '/v1/whoami', headers: { authorization: 'Bearer eyJhbGciOiJFZERTQSJ9.eyJpc3MiOjV9.AAAA' } },
  ];
  for (const req of attempts) {
    const res = await rawRequest(s.port, req);
    t.ok(res.status >= 400 && res.status < 500, `${req.method} ${req.path.toString('latin1').slice(0, 60)} → ${res.status}`);
  }
  t.equal((await s.api('GET', '/acme/alpha')).status, 200, 'still serving, alpha untouched');
});
