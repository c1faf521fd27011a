import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { SignaturePool } from '../../src/http/auth/signature-pool.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { CLI, createTestKey, runCli, signToken, type TestKey } from '../helpers/server.js';
import { metricValue } from '../helpers/metrics-text.js';

/**
 * Requests whose token is being verified while other things happen: more requests with the same
 * token, a key revoked or narrowed with the CLI. The server runs in this process so that the test
 * can hold its signature pool: a held check stays in flight until the test releases it, which
 * orders those events without a sleep.
 */
class HeldSignaturePool extends SignaturePool {
  private gate: Promise<void> | null = null;
  private open: () => void = () => undefined;

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.gate = null;
    this.open();
  }

  /** Runs once, synchronously, between a check's answer and the verifier's use of it. */
  onAnswer: (() => void) | null = null;

  override async verify(publicKey: Uint8Array, signingInput: string, signature: string): Promise<boolean> {
    if (this.gate) await this.gate;
    const valid = await super.verify(publicKey, signingInput, signature);
    const onAnswer = this.onAnswer;
    this.onAnswer = null;
    onAnswer?.();
    return valid;
  }
}

const dataDir = mkdtempSync(join(tmpdir(), 'repohost-races-'));
const setup = openStorage(dataDir);
createOrg(new LmdbOrgDirectory(setup), 'acme');
await setup.close();
const admin = createTestKey(dataDir, { org: 'acme', scopes: ['admin'], name: 'admin' });
const pool = new HeldSignaturePool(1);
const env = { REPOHOST_DATA: dataDir, PORT: '0', HOST: '127.0.0.1', REPOHOST_METRICS_ADDR: '127.0.0.1:0', REPOHOST_WORKERS: '1', LOG_LEVEL: 'silent' };
const server = await startServer(loadConfig(env), { signatures: pool });
t.teardown(async () => {
  pool.release();
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const api = async (method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: any }> => {
  const res = await fetch(`http://127.0.0.1:${server.port}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
};
const metric = async (name: string): Promise<number> => metricValue(await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text(), name);
const verified = (): Promise<number> => metric('repohost_token_signatures_verified_total');

/** Resolves once `n` requests wait for a signature check (the operator's gauge says so). */
async function waiting(n: number): Promise<void> {
  while ((await metric('repohost_token_signature_waiting_requests')) !== n) await new Promise((r) => setImmediate(r));
}

let keys = 0;
const newKey = (scopes: string[]): TestKey => createTestKey(dataDir, { org: 'acme', scopes, name: `races-${++keys}` });

t.test('auth - concurrent requests with the same new token wait for one signature check, and share its outcome', async (t) => {
  const token = await signToken(admin, 'acme', { scopes: ['read'] });
  const before = await verified();
  pool.hold();
  const answers = Promise.all(Array.from({ length: 20 }, () => api('GET', '/whoami', token)));
  await waiting(20);
  pool.release();
  t.same((await answers).map((r) => r.status), Array(20).fill(200));
  t.equal((await verified()) - before, 1, 'one signature check for twenty requests');
  t.equal(await metric('repohost_token_signature_waiting_requests'), 0);

  // Signed by another key than the one it names: a valid form, a signature that does not match.
  const forged = await signToken(newKey(['admin']), 'acme', { kid: admin.id });
  pool.hold();
  const refused = Promise.all(Array.from({ length: 5 }, () => api('GET', '/whoami', forged)));
  await waiting(5);
  pool.release();
  t.same((await refused).map((r) => r.status), Array(5).fill(401), 'every request bearing a forged token is refused');
  t.equal((await verified()) - before, 2, 'after one check');
});

t.test('auth - a key revoked while its token is verified refuses every request that waited for the check', async (t) => {
  const key = newKey(['read']);
  const token = await signToken(key, 'acme', { scopes: ['read'] });
  const before = await verified();
  pool.hold();
  const answers = Promise.all(Array.from({ length: 3 }, () => api('GET', '/whoami', token)));
  await waiting(3);
  const revoked = await runCli(['key', 'revoke', key.id, '--data', dataDir]);
  t.equal(revoked.code, 0, revoked.stderr);
  pool.release();
  for (const res of await answers) {
    t.equal(res.status, 401);
    t.equal(res.json.error.code, 'UNAUTHORIZED');
  }
  t.equal((await verified()) - before, 1, 'the signature itself was checked, and valid');
  const again = await api('GET', '/whoami', token);
  t.equal(again.status, 401, 'the token was not cached');
  t.equal((await verified()) - before, 1, 'and is refused now before any signature check');
});

t.test('auth - a key revoked the moment before a check is answered refuses the request, however recent the front end\'s snapshot', async (t) => {
  const key = newKey(['read']);
  const token = await signToken(key, 'acme', { scopes: ['read'] });
  let revoked: ReturnType<typeof spawnSync> | null = null;
  pool.onAnswer = () => {
    // Another request of this turn read the key table: the front end's snapshot is taken, and
    // the revocation below commits after it, in another process, before the answer is used.
    server.services.directory.version();
    revoked = spawnSync(process.execPath, [CLI, 'key', 'revoke', key.id, '--data', dataDir]);
  };
  const res = await api('GET', '/whoami', token);
  t.equal(revoked!.status, 0, String(revoked!.stderr));
  t.equal(res.status, 401);
  t.equal(res.json.error.code, 'UNAUTHORIZED');
});

t.test('auth - a key narrowed while its token is verified gives the request the narrower scopes', async (t) => {
  const key = newKey(['write']);
  const token = await signToken(key, 'acme', { scopes: ['write'] });
  pool.hold();
  const answer = api('POST', '/acme/repos', token, { name: 'narrowed-in-flight' });
  await waiting(1);
  const narrowed = await runCli(['key', 'scopes', key.id, 'read', '--data', dataDir]);
  t.equal(narrowed.code, 0, narrowed.stderr);
  pool.release();
  const res = await answer;
  t.equal(res.status, 403, 'the write is refused with the key as it is now');
  t.equal(res.json.error.code, 'FORBIDDEN');
  const who = await api('GET', '/whoami', token);
  t.equal(who.status, 200, 'the token itself is valid and cached with the narrower scopes');
  t.same(who.json.scopes, ['read']);
});
