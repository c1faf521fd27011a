import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { classifyFailure, redact, GitProtocolError, UpstreamStatusError } from '../../src/actors/system/sync/sync-errors.js';
import { remoteFor } from '../../src/actors/system/sync/git-remote.js';
import { gitHttpClient } from '../../src/actors/system/sync/git-http.js';
import {
  GIT_PASSWORD,
  GIT_TOKEN,
  GIT_USER,
  cleanupWork,
  makeUpstream,
  passwordAuth,
  pullAndWait,
  startSyncEnv,
  tokenAuth,
  type SyncEnv,
  type Upstream,
} from './fixtures.js';

const WRONG_PASSWORD = 'Wr0ng-Passw0rd-4411';
const WRONG_TOKEN = 'tok-wrong-5522-zz';
const ROTATED_TOKEN = 'tok-rotated-6633-yy';
const SECRETS = [
  GIT_PASSWORD,
  GIT_TOKEN,
  WRONG_PASSWORD,
  WRONG_TOKEN,
  ROTATED_TOKEN,
  Buffer.from(`${GIT_USER}:${GIT_PASSWORD}`).toString('base64'),
  Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64'),
  Buffer.from(`${GIT_USER}:${WRONG_PASSWORD}`).toString('base64'),
];

function leaks(text: string): string[] {
  return SECRETS.filter((secret) => text.includes(secret));
}

function* filesUnder(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* filesUnder(path);
    else yield path;
  }
}

t.test('credentials - redaction covers raw, URL-encoded and Basic forms and URL userinfo', async (t) => {
  const secret = 'p@ss w/rd:42';
  const remote = remoteFor('http://example.com/r.git', { kind: 'username_password', username: 'bob', password: secret }, gitHttpClient({ allowPrivate: false, idleTimeoutMs: 1000, userAgent: 'x' }));
  const basic = Buffer.from(`bob:${secret}`).toString('base64');
  t.same(remote.headers, { authorization: `Basic ${basic}` });
  const text = `failed: ${secret} / ${encodeURIComponent(secret)} / ${basic} / https://bob:${encodeURIComponent(secret)}@example.com/r.git`;
  const out = redact(text, remote.secrets);
  t.notOk(out.includes(secret) || out.includes(encodeURIComponent(secret)) || out.includes(basic) || out.includes('bob:'), out);

  const http = classifyFailure(new UpstreamStatusError(401), remote.secrets);
  t.same(http, { message: 'the upstream refused the credentials (HTTP 401 Unauthorized)', transient: false });
  const remoteSaid = classifyFailure(new GitProtocolError(`the remote reported: bad token ${secret}`), remote.secrets);
  t.equal(remoteSaid.message, 'the remote reported: bad token [redacted]');
  const refused = classifyFailure(Object.assign(new Error(`connect ECONNREFUSED for ${basic}`), { code: 'ECONNREFUSED' }), remote.secrets);
  t.equal(refused.transient, true);
  t.notOk(refused.message.includes(basic));
  t.equal(classifyFailure(new UpstreamStatusError(503), []).transient, true);
  t.equal(classifyFailure(new UpstreamStatusError(404), []).transient, false);
});

t.test('credentials - never in a response, sync record, event, log line or the data directory', async (t) => {
  const env: SyncEnv = await startSyncEnv();
  const up: Upstream = await makeUpstream(env.git, 'secret');
  t.teardown(async () => {
    cleanupWork(up);
    await env.close();
  });
  const seen: string[] = [];
  const api = async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await env.s.api(method, path, { body });
    seen.push(res.text);
    return res.json;
  };
  const create = async (name: string, auth: unknown): Promise<any> => api('POST', '/acme/repos', { name, upstream: { url: up.url, auth } });

  t.equal((await create('tok', tokenAuth)).upstream.auth_kind, 'token');
  t.equal((await create('pw', passwordAuth)).upstream.auth_kind, 'username_password');
  await create('badpw', { kind: 'username_password', username: GIT_USER, password: WRONG_PASSWORD });
  await create('badtok', { kind: 'token', token: WRONG_TOKEN });

  for (const name of ['tok', 'pw']) t.equal((await pullAndWait(env.s, name)).status, 'completed', name);
  for (const name of ['badpw', 'badtok']) {
    const failed = await pullAndWait(env.s, name);
    t.equal(failed.status, 'failed', name);
    t.match(failed.error, /401/);
  }
  t.equal((await pullAndWait(env.s, 'pw', { direction: 'push' })).status, 'completed');

  // Rotating to a wrong token, keeping it (auth omitted), then clearing it (auth null).
  t.equal((await api('PATCH', '/acme/tok', { upstream: { url: up.url, auth: { kind: 'token', token: ROTATED_TOKEN, token_username: 'bot' } } })).upstream.auth_kind, 'token');
  t.equal((await pullAndWait(env.s, 'tok')).status, 'failed', 'the rotated (wrong) token is used');
  t.equal((await api('PATCH', '/acme/tok', { upstream: { url: up.url } })).upstream.auth_kind, 'token', 'omitted auth keeps the credential');
  t.equal((await api('PATCH', '/acme/tok', { upstream: { url: up.url, auth: null } })).upstream.auth_kind, null, 'auth null clears it');
  t.match((await pullAndWait(env.s, 'tok')).error, /401/, 'no credential sent at all');

  for (const name of ['tok', 'pw', 'badpw', 'badtok']) {
    const list = await api('GET', `/acme/${name}/upstream/syncs?limit=200`);
    for (const sync of list.syncs) await api('GET', `/acme/${name}/upstream/syncs/${sync.id}`);
    await api('GET', `/acme/${name}`);
  }
  await api('GET', '/acme/repos');
  await api('GET', '/acme/repos/list');
  await api('GET', '/acme/sync-runs?limit=100');
  t.same(leaks(seen.join('\n')), [], 'responses');

  const events = await new Promise<string>((resolve, reject) => {
    env.rx.waitFor(() => env.rx.unique(env.hookPath).filter((d) => d.body?.type?.startsWith('sync.')).length >= 20, 15000, 'sync events').then(
      () => resolve(env.rx.received(env.hookPath).map((d) => d.raw).join('\n')),
      reject,
    );
  });
  t.ok(events.includes('sync.failed'), 'the failures were delivered as events');
  t.same(leaks(events), [], 'events');

  await env.s.stop();
  t.ok(env.s.logs.join('\n').includes('sync try failed'), 'failures were logged');
  t.same(leaks(env.s.logs.join('\n')), [], 'log lines');
  const stored = [...filesUnder(env.s.dataDir)].map((f) => readFileSync(f).toString('latin1')).join('\n');
  t.same(leaks(stored), [], 'data directory (credentials are sealed at rest)');
});
