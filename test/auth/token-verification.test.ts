import t from 'tap';
import { createPrivateKey, generateKeyPairSync, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { serverForFile, type TestKey } from '../helpers/server.js';
import { metricValue } from '../helpers/metrics-text.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg, createSigningKey, setKeyScopes, setKeyStatus } from '../../src/storage/admin-store.js';
import { SignaturePool } from '../../src/http/auth/signature-pool.js';
import { TokenVerifier } from '../../src/http/auth/token-verifier.js';
import type { Principal } from '../../src/http/auth/principal.js';

/**
 * Tokens not in the verified-token cache: their signatures are checked on the signature threads,
 * in batches, once per token however many requests bear it, never for a token that is malformed,
 * and never to the benefit of a key changed meanwhile.
 */
const s = await serverForFile(t);

const verified = async (): Promise<number> => metricValue(await s.metrics(), 'repohost_token_signatures_verified_total');
const whoami = (token: string) => s.api('GET', '/whoami', { token });

/** The same token with one signature character changed (still 86 base64url characters). */
function tampered(token: string): string {
  const i = token.length - 10;
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

t.test('auth - many distinct fresh tokens verified at once each act as their own key and scopes; tampered ones are 401', async (t) => {
  const keys: Array<{ key: TestKey; scopes: string[] }> = [
    { key: s.key, scopes: ['admin'] },
    { key: s.createKey({ scopes: ['write'], name: 'fresh-write' }), scopes: ['write'] },
    { key: s.createKey({ scopes: ['read'], name: 'fresh-read' }), scopes: ['read'] },
  ];
  const cases = await Promise.all(
    Array.from({ length: 300 }, async (_, i) => {
      const { key, scopes } = keys[i % keys.length]!;
      const token = await s.token({ key, scopes, extra: { jti: `fresh-${i}` } });
      return { key, scopes, token: i % 10 === 7 ? tampered(token) : token, valid: i % 10 !== 7 };
    }),
  );
  const before = await verified();
  const answers = await Promise.all(cases.map((c) => whoami(c.token)));
  for (const [i, res] of answers.entries()) {
    const c = cases[i]!;
    if (!c.valid) {
      t.equal(res.status, 401, `token ${i} (tampered)`);
      t.equal(res.json.error.code, 'UNAUTHORIZED');
      continue;
    }
    t.equal(res.status, 200, `token ${i}`);
    t.equal(res.json.signing_key.id, c.key.id, `token ${i} acts as its key`);
    t.same(res.json.scopes, c.scopes, `token ${i} has its scopes`);
  }
  t.equal((await verified()) - before, cases.length, 'one signature check per token, the tampered ones included');
  const again = await Promise.all(cases.map((c) => whoami(c.token)));
  t.same(again.map((r) => r.status), answers.map((r) => r.status), 'the same answers from the cache');
  t.equal((await verified()) - before, cases.length + cases.filter((c) => !c.valid).length, 'valid tokens are cached, refused ones are not');
});

t.test('auth - concurrent requests with the same new token all succeed and its signature is checked once', async (t) => {
  const token = await s.token({ scopes: ['read'] });
  const before = await verified();
  const answers = await Promise.all(Array.from({ length: 50 }, () => whoami(token)));
  t.same(new Set(answers.map((r) => r.status)), new Set([200]));
  t.equal((await verified()) - before, 1);

  const bad = tampered(await s.token());
  const refused = await Promise.all(Array.from({ length: 20 }, () => whoami(bad)));
  t.same(new Set(refused.map((r) => r.status)), new Set([401]), 'a bad token is refused to every request bearing it');
});

t.test('auth - malformed, expired and unknown-key tokens are refused before any signature check', async (t) => {
  const good = await s.token();
  const [header, payload, signature] = good.split('.') as [string, string, string];
  const json = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  const withHeader = (h: unknown): string => `${json(h)}.${payload}.${signature}`;
  const withClaims = (c: unknown): string => `${header}.${json(c)}.${signature}`;
  const refused: Array<[string, string]> = [
    ['two parts', `${header}.${payload}`],
    ['four parts', `${good}.${signature}`],
    ['a signature one character short', good.slice(0, -1)],
    ['a signature one character long', `${good}A`],
    ['padding', `${header}.${payload}.${signature.slice(0, -2)}==`],
    ['a character outside base64url', `${header}.${payload.slice(0, -1)}+.${signature}`],
    ['a header that is not JSON', `${Buffer.from('{alg').toString('base64url')}.${payload}.${signature}`],
    ['a header that is an array', withHeader(['EdDSA'])],
    ['alg none', withHeader({ alg: 'none', kid: s.key.id })],
    ['alg HS256', withHeader({ alg: 'HS256', kid: s.key.id })],
    ['an unknown critical extension', withHeader({ alg: 'EdDSA', kid: s.key.id, crit: ['exp'] })],
    ['an unencoded payload', withHeader({ alg: 'EdDSA', kid: s.key.id, crit: ['b64'], b64: false })],
    ['claims that are not an object', withClaims('repohost')],
    ['expired', withClaims({ ...claims, iat: now - 7200, exp: now - 3600 })],
    ['not yet valid', withClaims({ ...claims, nbf: now + 600 })],
    ['another audience', withClaims({ ...claims, aud: 'elsewhere' })],
    ['no exp', withClaims({ ...claims, exp: undefined })],
    ['a lifetime over the cap', withClaims({ ...claims, exp: now + 5 * 3600 })],
    ['scopes that are not a list', withClaims({ ...claims, scopes: 'admin' })],
    ['invalid UTF-8 in the claims', `${header}.${Buffer.from([0x7b, 0xff, 0x7d]).toString('base64url')}.${signature}`],
  ];
  const before = await verified();
  for (const [what, token] of refused) {
    const res = await whoami(token);
    t.equal(res.status, 401, what);
    t.equal(res.json.error.code, 'UNAUTHORIZED', what);
  }
  const unknown = await whoami(withHeader({ alg: 'EdDSA', kid: 'key_01J0000000000000000000000' }));
  t.equal(unknown.json.error.code, 'JWT_UNKNOWN_PUBLIC_KEY');
  t.equal((await verified()) - before, 0, 'no signature was checked');
  t.equal((await whoami(good)).status, 200, 'the token they were made from is valid');
});

t.test('auth - a key revoked while its tokens are being verified: nothing verified before is accepted or cached after', async (t) => {
  const key = s.createKey({ scopes: ['read'], name: 'revoked-in-flight' });
  const tokens = await Promise.all(Array.from({ length: 400 }, (_, i) => s.token({ key, scopes: ['read'], extra: { jti: `rev-${i}` } })));
  const answers = Promise.all(tokens.map((token) => whoami(token)));
  const revoked = await s.cli(['key', 'revoke', key.id]);
  t.equal(revoked.code, 0, revoked.stderr);
  for (const res of await answers) t.ok(res.status === 200 || res.status === 401, `answered ${res.status}`);
  const after = await Promise.all(tokens.map((token) => whoami(token)));
  t.same(new Set(after.map((r) => r.status)), new Set([401]), 'every token is refused once the revocation is done');
});

t.test('token verifier - a key changed between the checks of a token and its signature decides the outcome', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'repohost-verifier-'));
  const storage = openStorage(dataDir);
  const pool = new SignaturePool(1);
  t.teardown(async () => {
    await pool.close();
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  createOrg(storage, 'acme');
  const created = createSigningKey(storage, 'acme', { scopes: ['write'] });
  const privateKey = createPrivateKey(created.privateKeyPem);
  const verifier = new TokenVerifier(storage, { audiences: ['repohost'], maxTtlS: 14400 }, pool);
  let n = 0;
  const sign = () =>
    new SignJWT({ scopes: ['write'], jti: `v-${++n}` })
      .setProtectedHeader({ alg: 'EdDSA', kid: created.record.id })
      .setIssuer('acme')
      .setAudience('repohost')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
  const bearer = async (): Promise<string> => `Bearer ${await sign()}`;
  const pending = (auth: string): Promise<Principal> => {
    const result = verifier.authenticate(auth);
    t.ok(result instanceof Promise, 'a new token waits for its signature');
    return result as Promise<Principal>;
  };

  // Each change is committed after the token's other checks and before its signature is known:
  // no thread can answer before this test yields.
  const disabled = await bearer();
  const whileDisabled = pending(disabled);
  setKeyStatus(storage, created.record.id, 'disabled');
  await t.rejects(whileDisabled, { code: 'UNAUTHORIZED' }, 'disabled while verifying: refused');
  setKeyStatus(storage, created.record.id, 'active');
  const enabled = verifier.authenticate(disabled);
  t.ok(enabled instanceof Promise, 'and not cached: verified anew once the key is enabled');
  t.ok((await enabled).permissions.has('repo:create'));

  const narrowed = await bearer();
  const whileNarrowed = pending(narrowed);
  setKeyScopes(storage, created.record.id, ['read']);
  const principal = await whileNarrowed;
  t.notOk(principal.permissions.has('repo:create'), 'narrowed while verifying: the narrower scopes apply');
  t.ok(principal.permissions.has('repo:read'));
  t.equal(verifier.authenticate(narrowed), principal, 'cached with the table it was decided by');

  const revoked = await bearer();
  const whileRevoked = pending(revoked);
  const same = verifier.authenticate(revoked);
  setKeyStatus(storage, created.record.id, 'revoked');
  await t.rejects(whileRevoked, { code: 'UNAUTHORIZED' }, 'revoked while verifying: refused');
  await t.rejects(same as Promise<Principal>, { code: 'UNAUTHORIZED' }, 'a request that joined the same verification is refused too');
  t.throws(() => verifier.authenticate(revoked), { code: 'UNAUTHORIZED' }, 'and the next request is refused before any signature check');
  t.equal(pool.stats.verified, 4, 'the joined request checked no second signature');
});

t.test('signature pool - checks queued in one turn go out together, at most 16 to a message, each answered for itself', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = (publicKey.export({ format: 'jwk' }) as { x: string }).x;
  const pool = new SignaturePool(2);
  t.teardown(() => pool.close());
  const inputs = Array.from({ length: 40 }, (_, i) => `header.claims-${i}`);
  const signatures = inputs.map((input, i) => sign(null, Buffer.from(i % 5 === 3 ? `${input}!` : input), privateKey).toString('base64url'));
  const results = await Promise.all(inputs.map((input, i) => pool.verify(x, input, signatures[i]!)));
  t.same(results, inputs.map((_, i) => i % 5 !== 3), 'each signature answered for itself');
  t.same(pool.stats, { verified: 40, batches: 3 }, '40 checks in 3 messages');

  const late = t.rejects(pool.verify(x, inputs[0]!, signatures[0]!), { code: 'UNAVAILABLE' }, 'a check still queued when the pool closes is refused, retryable');
  await pool.close();
  await late;
  await t.rejects(pool.verify(x, inputs[0]!, signatures[0]!), { code: 'UNAVAILABLE' });
});
