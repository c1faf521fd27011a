import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createRepo, createTarget, startEnv, type Env } from './setup.js';

let e: Env;
/** A second server with the default policy (private webhook addresses not allowed), started alongside. */
let strict: TestServer;
t.before(async () => {
  [e, strict] = await Promise.all([startEnv(), startTestServer({ env: { REPOHOST_ALLOW_PRIVATE_WEBHOOKS: '0' } })]);
});
t.teardown(async () => {
  await Promise.all([e.close(), strict.stop()]);
  strict.cleanup();
});

const SECRET = /^whsec_[A-Za-z0-9_-]{43}$/;

t.test('webhook targets - create shows the secret once; get, list, patch and logs never do', async (t) => {
  const url = e.rx.url('/hook');
  const res = await e.s.api('POST', '/acme/webhook-targets', { body: { url } });
  t.equal(res.status, 201);
  const secret = res.json.secret as string;
  t.match(secret, SECRET, 'whsec_ + 32 random bytes, base64url');
  t.match(res.json.id, /^wht_/);
  t.equal(res.json.name, new URL(url).host, 'name defaults to the URL host');
  t.same(res.json.events, ['push'], 'events default to push');
  t.equal(res.json.repo_ids, null, 'absent repo_ids = org-wide');
  t.equal(res.json.url, url);
  t.ok(res.json.created_at && res.json.updated_at);

  const id = res.json.id as string;
  const got = await e.s.api('GET', `/acme/webhook-targets/${id}`);
  t.equal(got.status, 200);
  t.same(Object.keys(got.json).sort(), ['created_at', 'events', 'id', 'name', 'repo_ids', 'updated_at', 'url']);
  const listed = await e.s.api('GET', '/acme/webhook-targets');
  t.equal(listed.status, 200);
  t.ok(listed.json.webhook_targets.some((x: any) => x.id === id));
  const patched = await e.s.api('PATCH', `/acme/webhook-targets/${id}`, { body: { name: 'renamed' } });
  t.equal(patched.status, 200);
  for (const r of [got, listed, patched]) t.notOk(r.text.includes(secret) || 'secret' in (r.json.webhook_targets?.[0] ?? r.json), 'no secret in the response');

  const rotated = await e.s.api('POST', `/acme/webhook-targets/${id}/rotate-secret`);
  t.equal(rotated.status, 200);
  t.match(rotated.json.secret, SECRET);
  t.not(rotated.json.secret, secret);
  t.same(Object.keys(rotated.json), ['secret']);

  const logs = e.s.logs.join('\n');
  t.notOk(logs.includes(secret) || logs.includes(rotated.json.secret), 'no secret in the server log');
});

t.test('webhook targets - bad input is refused with 400 and a message', async (t) => {
  const other = await otherOrgRepo(e.s);
  const url = e.rx.url('/x');
  const cases: Array<[string, Record<string, unknown>]> = [
    ['missing url', {}],
    ['not a URL', { url: 'not a url' }],
    ['not http(s)', { url: 'ftp://127.0.0.1/x' }],
    ['userinfo', { url: 'http://user:pw@127.0.0.1/x' }],
    ['link-local metadata even with private allowed', { url: 'http://169.254.169.254/latest/meta-data' }],
    ['IPv6 link-local', { url: 'http://[fe80::1]/x' }],
    ['metadata host name', { url: 'http://metadata.google.internal/x' }],
    ['empty name', { url, name: '' }],
    ['name over 256', { url, name: 'n'.repeat(257) }],
    ['empty events', { url, events: [] }],
    ['unknown event kind', { url, events: ['push', 'repo.exploded'] }],
    ['empty repo_ids', { url, repo_ids: [] }],
    ['nonexistent repo id', { url, repo_ids: ['repo_01NOPE'] }],
    ['repo of another org', { url, repo_ids: [other] }],
    ['unknown field', { url, secret: 'whsec_mine' }],
  ];
  for (const [what, body] of cases) {
    const res = await e.s.api('POST', '/acme/webhook-targets', { body });
    t.equal(res.status, 400, `create: ${what}`);
    t.equal(res.json?.error?.code, 'INVALID_REQUEST', `create: ${what} (${res.json?.error?.message})`);
  }
  t.equal((await e.s.api('POST', '/acme/webhook-targets', { body: { url, name: 'n'.repeat(256) } })).status, 201, 'a 256-character name is fine');

  const target = await createTarget(e);
  for (const [what, body] of [
    ['link-local url', { url: 'http://169.254.169.254/' }],
    ['empty events', { events: [] }],
    ['unknown kind', { events: ['nope'] }],
    ['nonexistent repo', { repo_ids: ['repo_01NOPE'] }],
    ['empty name', { name: '' }],
  ] as Array<[string, Record<string, unknown>]>) {
    const res = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body });
    t.equal(res.status, 400, `patch: ${what}`);
  }
});

t.test('webhook targets - unknown ids are 404 and scopes below admin are 403', async (t) => {
  const target = await createTarget(e);
  for (const [method, path] of [
    ['GET', '/acme/webhook-targets/wht_01NOPE'],
    ['PATCH', '/acme/webhook-targets/wht_01NOPE'],
    ['DELETE', '/acme/webhook-targets/wht_01NOPE'],
    ['POST', '/acme/webhook-targets/wht_01NOPE/rotate-secret'],
    ['GET', '/acme/webhook-targets/wht_01NOPE/deliveries'],
    ['POST', `/acme/webhook-targets/${target.id}/deliveries/dlv_01NOPE/redeliver`],
  ]) {
    const res = await e.s.api(method!, path!, method === 'PATCH' ? { body: { name: 'x' } } : {});
    t.equal(res.status, 404, `${method} ${path}`);
    t.equal(res.json.error.code, 'NOT_FOUND');
  }
  const write = await e.s.token({ scopes: ['write'] });
  for (const [method, path] of [
    ['POST', '/acme/webhook-targets'],
    ['GET', '/acme/webhook-targets'],
    ['GET', `/acme/webhook-targets/${target.id}`],
    ['PATCH', `/acme/webhook-targets/${target.id}`],
    ['DELETE', `/acme/webhook-targets/${target.id}`],
    ['POST', `/acme/webhook-targets/${target.id}/rotate-secret`],
    ['GET', `/acme/webhook-targets/${target.id}/deliveries`],
  ]) {
    const res = await e.s.api(method!, path!, { token: write, ...(method === 'GET' || method === 'DELETE' ? {} : { body: { url: e.rx.url('/w') } }) });
    t.equal(res.status, 403, `write token: ${method} ${path}`);
  }
  const deleted = await e.s.api('DELETE', `/acme/webhook-targets/${target.id}`);
  t.same([deleted.status, deleted.json], [200, { success: true }]);
  t.equal((await e.s.api('GET', `/acme/webhook-targets/${target.id}`)).status, 404, 'gone after delete');
});

t.test('webhook targets - PATCH replaces the fields given, keeps the others, repo_ids null = org-wide', async (t) => {
  const r1 = await createRepo(e, 'patch-one');
  const r2 = await createRepo(e, 'patch-two');
  const target = await createTarget(e, { name: 'p', events: ['repo.updated', 'push'], repo_ids: [r1.id, r1.id] });
  t.same(target.body.repo_ids, [r1.id], 'duplicates collapse');

  let res = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body: { repo_ids: [r2.id] } });
  t.equal(res.status, 200);
  t.same([res.json.name, res.json.events, res.json.repo_ids, res.json.url], ['p', ['repo.updated', 'push'], [r2.id], target.body.url]);
  res = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body: { events: ['repo.created'], url: e.rx.url('/moved') } });
  t.same([res.json.events, res.json.url, res.json.repo_ids], [['repo.created'], e.rx.url('/moved'), [r2.id]]);
  res = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body: { repo_ids: null } });
  t.equal(res.json.repo_ids, null, 'repo_ids null makes the target org-wide');
  t.equal(res.json.name, 'p');
  t.ok(res.json.updated_at >= target.body.updated_at);
  t.equal((await e.s.api('GET', `/acme/webhook-targets/${target.id}`)).json.repo_ids, null, 'stored');
});

t.test('webhook targets - lists page newest first with cursors', async (t) => {
  const made = [await createTarget(e, { name: 'page-a' }), await createTarget(e, { name: 'page-b' }), await createTarget(e, { name: 'page-c' })];
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res: any = await e.s.api('GET', `/acme/webhook-targets?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    t.equal(res.json.webhook_targets.length, 1);
    seen.push(res.json.webhook_targets[0].id);
    cursor = res.json.next_cursor;
    t.equal(res.json.has_more, cursor !== null);
  } while (cursor);
  t.same(seen.slice(0, 3), made.map((m) => m.id).reverse(), 'newest first');
  t.equal(new Set(seen).size, seen.length, 'no target twice');
  t.equal((await e.s.api('GET', '/acme/webhook-targets?limit=101')).status, 400, 'limit over 100');
  t.equal((await e.s.api('GET', '/acme/webhook-targets?cursor=%%%')).status, 400, 'malformed cursor');
});

t.test('webhook targets - private and loopback URLs are refused unless the operator allows them', async (t) => {
  for (const url of ['http://127.0.0.1:9/x', 'http://10.1.2.3/x', 'http://192.168.0.1/x', 'http://[::1]/x', 'http://localhost:9/x', 'http://[::]:9/x', 'http://0.0.0.0:9/x']) {
    const res = await strict.api('POST', '/acme/webhook-targets', { body: { url } });
    t.equal(res.status, 400, url);
    t.match(res.json.error.message, /private or loopback/, url);
  }
});

t.test('webhook targets - a repository-restricted admin sees and manages only targets within its repositories', async (t) => {
  const mine = await createRepo(e, 'scoped-mine');
  const theirs = await createRepo(e, 'scoped-theirs');
  const orgWide = await createTarget(e, { name: 'org-wide' });
  const mixed = await createTarget(e, { name: 'mixed', repo_ids: [mine.id, theirs.id] });
  const token = await e.s.token({ scopes: ['admin'], repos: ['acme/scoped-mine'] });
  const as = (method: string, path: string, body?: unknown) => e.s.api(method, path, { token, body });

  t.equal((await as('POST', '/acme/webhook-targets', { url: e.rx.url('/r') })).status, 403, 'no org-wide target');
  t.equal((await as('POST', '/acme/webhook-targets', { url: e.rx.url('/r'), repo_ids: [theirs.id] })).status, 403, 'no target on a repository outside');
  const own = await as('POST', '/acme/webhook-targets', { url: e.rx.url('/r'), repo_ids: [mine.id] });
  t.equal(own.status, 201);

  const listed = await as('GET', '/acme/webhook-targets');
  t.same(listed.json.webhook_targets.map((x: any) => x.id), [own.json.id], 'lists only its own');
  for (const other of [orgWide, mixed]) {
    t.equal((await as('GET', `/acme/webhook-targets/${other.id}`)).status, 404);
    t.equal((await as('PATCH', `/acme/webhook-targets/${other.id}`, { name: 'x' })).status, 404);
    t.equal((await as('DELETE', `/acme/webhook-targets/${other.id}`)).status, 404);
    t.equal((await as('POST', `/acme/webhook-targets/${other.id}/rotate-secret`)).status, 404);
    t.equal((await as('GET', `/acme/webhook-targets/${other.id}/deliveries`)).status, 404);
  }
  t.equal((await as('PATCH', `/acme/webhook-targets/${own.json.id}`, { repo_ids: null })).status, 403, 'cannot widen to org-wide');
  t.equal((await as('PATCH', `/acme/webhook-targets/${own.json.id}`, { repo_ids: [theirs.id] })).status, 403, 'cannot widen to other repositories');
  t.equal((await as('PATCH', `/acme/webhook-targets/${own.json.id}`, { name: 'mine' })).json.name, 'mine');
  t.equal((await as('DELETE', `/acme/webhook-targets/${own.json.id}`)).status, 200);
  t.equal((await e.s.api('GET', `/acme/webhook-targets/${mixed.id}`)).status, 200, 'the unrestricted admin still sees the others');

  // Once the other repository is deleted, its id (kept in repo_ids) is nobody's: the target is within reach.
  const doomed = await createRepo(e, 'scoped-doomed');
  const shared = await createTarget(e, { name: 'shared', repo_ids: [mine.id, doomed.id] });
  t.equal((await as('GET', `/acme/webhook-targets/${shared.id}`)).status, 404, 'not while the other repository exists');
  t.equal((await e.s.api('DELETE', '/acme/scoped-doomed')).status, 200);
  const seen = await as('GET', `/acme/webhook-targets/${shared.id}`);
  t.equal(seen.status, 200, 'visible once the other repository is gone');
  t.same(seen.json.repo_ids, [mine.id, doomed.id]);
  t.equal((await as('PATCH', `/acme/webhook-targets/${shared.id}`, { repo_ids: [mine.id, doomed.id], name: 'kept' })).status, 200, 'and manageable with repo_ids as read');
});

/** A repository in another org: its id must not be accepted in this org's targets. */
async function otherOrgRepo(s: TestServer): Promise<string> {
  s.createOrg('other');
  const key = s.createKey({ scopes: ['admin'], org: 'other' });
  const token = await s.token({ key, issuer: 'other' });
  const res = await s.api('POST', '/other/repos', { token, body: { name: 'elsewhere' } });
  if (res.status !== 201) throw new Error(`other org repo: ${res.status} ${res.text}`);
  return res.json.id as string;
}
