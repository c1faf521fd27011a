import { createHmac, sign } from 'node:crypto';
import { createServer } from 'node:net';
import { WEBHOOK_EVENT_KINDS } from '../../src/protocol/schemas/webhooks.js';
import { openStorage } from '../../src/storage/database.js';
import { setKeyStatus } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { startTestServer, type TestKey, type TestServer, type TokenOptions } from '../helpers/server.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { FixtureRef, toJsonText } from './json-values.js';

/**
 * What the fuzzer's requests aim at: a real server with two repositories (one with changes,
 * bookmarks, a staged blob, an upstream and a sync; one empty), a webhook target delivering to a
 * real receiver, and a set of tokens — valid ones of every scope and restriction, and broken
 * ones of every kind. Requests name these by `FixtureRef`, resolved when sent; whatever a
 * successful write removed or renamed is put back before the next request.
 */
export const ROOT_CHANGE = 'z'.repeat(32);
const HOOK_PATH = '/fuzz';

/** Tokens a request may carry, by name. Absent from the map: no Authorization header at all. */
export const VALID_TOKENS = [
  'admin',
  'write',
  'read',
  'git-read',
  'git-write',
  'repo-read',
  'repo-create',
  'restricted-by-name',
  'restricted-by-id',
  'restricted-key',
  'other-org',
  'embedded-jwk',
  'authors',
  'proto-scopes',
  'no-scopes',
  'lowercase-scheme',
] as const;

export const INVALID_TOKENS = [
  'none',
  'empty-bearer',
  'basic',
  'garbage',
  'three-dots',
  'bad-base64',
  'expired',
  'issued-in-future',
  'too-long-lived',
  'oversized',
  'hs256',
  'alg-none',
  'wrong-audience',
  'unknown-kid',
  'wrong-issuer',
  'tampered',
  'disabled-key',
  'revoked-key',
  'header-proto',
  'claims-proto',
] as const;

export type TokenName = (typeof VALID_TOKENS)[number] | (typeof INVALID_TOKENS)[number];

/** The claims every fuzzed token starts from before its mutations (`now`/`exp` filled in when signed). */
export const CLAIMS_TEMPLATE = { iss: 'acme', aud: 'repohost', iat: new FixtureRef('now'), exp: new FixtureRef('exp'), scopes: ['admin'], jti: 'fuzz' };
export const HEADER_TEMPLATE = { alg: 'EdDSA', kid: new FixtureRef('kid') };

const b64 = (text: string | Buffer): string => Buffer.from(text).toString('base64url');

/** A compact JWS over exactly these header and payload texts, signed with `key` (Ed25519). */
function signRaw(headerText: string, payloadText: string, key: TestKey): string {
  const input = `${b64(headerText)}.${b64(payloadText)}`;
  return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`;
}

/** A port nothing listens on: the upstream's syncs fail at once with a refused connection. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface FuzzFixture {
  server: TestServer;
  receiver: WebhookReceiver;
  /** The Authorization header of a named token (undefined: send none). */
  authorization(name: TokenName): string | undefined;
  /** An admin-key token over the given (possibly broken) header and claims, validly signed. */
  signed(header: unknown, claims: unknown): string;
  resolve(ref: FixtureRef): unknown;
  /** Undoes what a successful write added and puts back what it removed. */
  afterWrite(route: string, status: number, json: any): Promise<void>;
  close(): Promise<void>;
}

interface State {
  repoId: string;
  repo2Id: string;
  change: string;
  change2: string;
  commit: string;
  blob: string;
  sync: string;
  target: string;
  delivery: string;
}

export async function startFuzzFixture(): Promise<FuzzFixture> {
  const receiver = await startWebhookReceiver();
  let server: TestServer;
  try {
    server = await startTestServer({ env: { REPOHOST_SYNC_RETRY_BASE_MS: '100' } });
  } catch (err) {
    await receiver.close();
    throw err;
  }
  try {
    return await prepare(server, receiver);
  } catch (err) {
    await server.stop();
    server.cleanup();
    await receiver.close();
    throw err;
  }
}

async function prepare(server: TestServer, receiver: WebhookReceiver): Promise<FuzzFixture> {
  const upstreamUrl = `http://127.0.0.1:${await closedPort()}/upstream.git`;
  const admin = await server.token({ ttl: 4 * 3600 });
  let counter = 0;

  const call = async (method: string, path: string, body?: unknown, expect?: number): Promise<any> => {
    const res = await server.api(method, path, { token: admin, body });
    if (expect !== undefined && res.status !== expect) throw new Error(`fuzz fixture: ${method} ${path} answered ${res.status}: ${res.text}`);
    return res;
  };

  const state = {} as State;

  async function makeTarget(): Promise<void> {
    const target = await call('POST', '/acme/webhook-targets', { url: receiver.url(HOOK_PATH), events: WEBHOOK_EVENT_KINDS }, 201);
    receiver.setSecret(HOOK_PATH, target.json.secret);
    state.target = target.json.id;
  }

  /** r1: a README and a file with metadata on `main`, a child change on `feat`, a staged blob, an upstream and a sync. */
  async function makeRepo(): Promise<void> {
    const repo = await call('POST', '/acme/repos', { name: 'r1', upstream: { url: upstreamUrl } }, 201);
    state.repoId = repo.json.id;
    const first = await call(
      'POST',
      '/acme/r1/apply-ops',
      {
        base_change_id: ROOT_CHANGE,
        ops: [
          { op: 'write', path: 'README.md', content: '# fuzz\n' },
          { op: 'write', path: 'docs/a.md', content: 'a\n' },
          { op: 'set_metadata', path: 'docs/a.md', metadata: { team: 'fuzz' } },
        ],
        bookmarks: [{ name: 'main' }],
      },
      201,
    );
    state.change = first.json.change.id;
    state.commit = first.json.change.current_commit_oid;
    const second = await call('POST', '/acme/r1/apply-ops', { base_change_id: state.change, ops: [{ op: 'write', path: 'docs/b.md', content: 'b\n' }], bookmarks: [{ name: 'feat', create: true }] }, 201);
    state.change2 = second.json.change.id;
    const blob = await server.api('POST', '/acme/r1/blobs', { token: admin, raw: 'staged bytes\n', headers: { 'content-type': 'application/octet-stream' } });
    if (blob.status !== 201) throw new Error(`fuzz fixture: blob upload answered ${blob.status}: ${blob.text}`);
    state.blob = blob.json.oid;
    state.sync = (await call('POST', '/acme/r1/upstream/syncs', { direction: 'pull' }, 201)).json.id;
  }

  await makeTarget();
  await makeRepo();
  state.repo2Id = (await call('POST', '/acme/repos', { name: 'r2' }, 201)).json.id;
  // A delivery to redeliver: the writes above raised events for the target.
  const deadline = Date.now() + 15000;
  for (;;) {
    const page = await call('GET', `/acme/webhook-targets/${state.target}/deliveries?limit=1`, undefined, 200);
    if (page.json.deliveries.length) {
      state.delivery = page.json.deliveries[0].id;
      break;
    }
    if (Date.now() > deadline) throw new Error('fuzz fixture: no webhook delivery was logged');
    await new Promise((r) => setTimeout(r, 50));
  }

  server.createOrg('other');
  const otherKey = server.createKey({ scopes: ['admin'], org: 'other', name: 'other-admin' });
  const restrictedKey = server.createKey({ scopes: ['admin'], repos: ['r2'], name: 'restricted' });
  const disabledKey = server.createKey({ scopes: ['admin'], name: 'disabled' });
  const revokedKey = server.createKey({ scopes: ['admin'], name: 'revoked' });
  const ttl = 4 * 3600;
  const mint = (o: TokenOptions = {}): Promise<string> => server.token({ ttl, ...o });
  const now = Math.floor(Date.now() / 1000);
  const claims = (extra: Record<string, unknown> = {}): string => JSON.stringify({ iss: 'acme', aud: 'repohost', iat: now, exp: now + ttl, scopes: ['admin'], ...extra });
  const validHeader = JSON.stringify({ alg: 'EdDSA', kid: server.key.id });
  const hsInput = `${b64(JSON.stringify({ alg: 'HS256', kid: server.key.id }))}.${b64(claims())}`;
  const adminParts = admin.split('.');
  const tokens: Record<TokenName, string | undefined> = {
    admin,
    write: await mint({ scopes: ['write'] }),
    read: await mint({ scopes: ['read'] }),
    'git-read': await mint({ scopes: ['git:read'] }),
    'git-write': await mint({ scopes: ['git:write'] }),
    'repo-read': await mint({ scopes: ['repo:read'] }),
    'repo-create': await mint({ scopes: ['repo:create'] }),
    'restricted-by-name': await mint({ repos: ['acme/r2'] }),
    'restricted-by-id': await mint({ repo_ids: [state.repo2Id] }),
    'restricted-key': await mint({ key: restrictedKey }),
    'other-org': await mint({ key: otherKey, issuer: 'other' }),
    'embedded-jwk': await mint({ embedJwk: true }),
    authors: await mint({ author: [['Fuzz Author', 'fuzz@example.com'], ['No Mail', null]] }),
    'proto-scopes': await mint({ scopes: ['constructor', '__proto__', 'toString', 'hasOwnProperty'] }),
    'no-scopes': signRaw(validHeader, JSON.stringify({ iss: 'acme', aud: 'repohost', iat: now, exp: now + ttl }), server.key),
    'lowercase-scheme': admin,
    none: undefined,
    'empty-bearer': '',
    basic: 'dXNlcjpwYXNz',
    garbage: 'x'.repeat(40),
    'three-dots': 'a.b.c',
    'bad-base64': '!!!.@@@.###',
    expired: await mint({ iat: now - 3 * 3600, ttl: 3600 }),
    'issued-in-future': await mint({ iat: now + 3600 }),
    'too-long-lived': await mint({ ttl: 5 * 3600 }),
    oversized: await mint({ extra: { pad: 'x'.repeat(9000) } }),
    hs256: `${hsInput}.${createHmac('sha256', 'secret').update(hsInput).digest('base64url')}`,
    'alg-none': `${b64(JSON.stringify({ alg: 'none', kid: server.key.id }))}.${b64(claims())}.`,
    'wrong-audience': await mint({ audience: 'someone-else' }),
    'unknown-kid': await mint({ kid: 'key_01NOTAKEY' }),
    'wrong-issuer': await mint({ issuer: 'nope' }),
    tampered: `${adminParts[0]}.${b64(claims({ scopes: ['admin'], jti: 'tampered' }))}.${adminParts[2]}`,
    'disabled-key': await mint({ key: disabledKey }),
    'revoked-key': await mint({ key: revokedKey }),
    'header-proto': signRaw(`{"alg":"EdDSA","kid":${JSON.stringify(server.key.id)},"__proto__":{"alg":"none"}}`, claims(), server.key),
    'claims-proto': signRaw(validHeader, claims().replace(/}$/, ',"__proto__":{"scopes":["admin"]},"constructor":{"prototype":{}}}'), server.key),
  };
  const storage = openStorage(server.dataDir);
  try {
    const directory = new LmdbOrgDirectory(storage);
    setKeyStatus(directory, disabledKey.id, 'disabled');
    setKeyStatus(directory, revokedKey.id, 'revoked');
  } finally {
    await storage.close();
  }

  const refs: Record<string, () => unknown> = {
    org: () => 'acme',
    repo: () => 'r1',
    repo2: () => 'r2',
    repo_ids: () => [state.repoId],
    change: () => state.change,
    change2: () => state.change2,
    root: () => ROOT_CHANGE,
    commit: () => state.commit,
    blob: () => state.blob,
    bookmark: () => 'main',
    bookmark2: () => 'feat',
    path: () => 'README.md',
    dir: () => 'docs',
    file: () => 'docs/a.md',
    new_path: () => `new/${counter++}.txt`,
    new_name: () => `fz-${counter++}`,
    sync: () => state.sync,
    target: () => state.target,
    delivery: () => state.delivery,
    hook_url: () => receiver.url(HOOK_PATH),
    upstream_url: () => upstreamUrl,
    kid: () => server.key.id,
    now: () => Math.floor(Date.now() / 1000),
    exp: () => Math.floor(Date.now() / 1000) + 3600,
  };

  /** Puts back r1 (with its bookmarks and upstream), r2 and the webhook target if a write removed them. */
  async function repair(): Promise<void> {
    const repo = await call('GET', '/acme/r1');
    if (repo.status === 404) await makeRepo();
    else if (!repo.json.upstream) await call('PATCH', '/acme/r1', { upstream: { url: upstreamUrl } }, 200);
    if ((await call('GET', '/acme/r2')).status === 404) state.repo2Id = (await call('POST', '/acme/repos', { name: 'r2' }, 201)).json.id;
    if ((await call('GET', `/acme/webhook-targets/${state.target}`)).status === 404) await makeTarget();
    for (const [name, change] of [['main', state.change], ['feat', state.change2]] as const) {
      if ((await call('GET', `/acme/r1/bookmarks/${name}`)).status === 404) await call('POST', '/acme/r1/bookmarks', { name, change_id: change }, 201);
    }
    const change = await call('GET', `/acme/r1/changes/${state.change}`);
    if (change.status === 200) state.commit = change.json.current_commit_oid;
  }

  const resolveRef = (ref: FixtureRef): unknown => {
    const get = refs[ref.name];
    if (!get) throw new Error(`fuzz fixture: no value named ${ref.name}`);
    return get();
  };

  return {
    server,
    receiver,
    authorization(name) {
      const token = tokens[name];
      if (token === undefined) return undefined;
      if (name === 'basic') return `Basic ${token}`;
      if (name === 'lowercase-scheme') return `bearer ${token}`;
      return `Bearer ${token}`;
    },
    signed(header, claimsValue) {
      return signRaw(toJsonText(header, resolveRef), toJsonText(claimsValue, resolveRef), server.key);
    },
    resolve: resolveRef,
    async afterWrite(route, status, json) {
      if (status === 201 && route === 'POST /{org}/repos' && json?.name) await call('DELETE', `/acme/${encodeURIComponent(json.name)}`);
      if (status === 201 && route === 'POST /{org}/webhook-targets' && json?.id) await call('DELETE', `/acme/webhook-targets/${json.id}`);
      if (status === 200 && route === 'POST /{org}/webhook-targets/{id}/rotate-secret' && json?.secret) receiver.setSecret(HOOK_PATH, json.secret);
      await repair();
    },
    async close() {
      await server.stop();
      server.cleanup();
      await receiver.close();
    },
  };
}
