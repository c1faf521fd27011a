import t from 'tap';
import { generateKeyPairSync, sign } from 'node:crypto';
import { serverForFile, type TestKey } from '../helpers/server.js';
import { metricValue } from '../helpers/metrics-text.js';
import { SignaturePool } from '../../src/http/auth/signature-pool.js';

/**
 * Tokens not in the verified-token cache: their signatures are checked on the signature threads,
 * in batches, once per token, and never for a token refused on its form, its key or its claims.
 * Concurrent requests and key changes during a check: token-verification-races.test.ts.
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

t.test('auth - a token signed by another key than the one it names is 401 after its signature is checked', async (t) => {
  const other = s.createKey({ scopes: ['admin'], name: 'other-signer' });
  const forged = await s.token({ key: other, kid: s.key.id });
  const before = await verified();
  const res = await whoami(forged);
  t.equal(res.status, 401);
  t.equal(res.json.error.code, 'UNAUTHORIZED');
  t.equal((await verified()) - before, 1, 'refused by its signature');
  t.equal((await whoami(await s.token({ key: other }))).status, 200, 'the same key naming itself is valid');
});

t.test('auth - malformed, expired and unknown-key tokens are refused before any signature check', async (t) => {
  const good = await s.token();
  const [header, payload, signature] = good.split('.') as [string, string, string];
  const json = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  const withHeader = (h: unknown): string => `${json(h)}.${payload}.${signature}`;
  const withClaims = (c: unknown): string => `${header}.${json(c)}.${signature}`;
  const padding = 'x'.repeat(6 * 1024);
  const refused: Array<[string, string]> = [
    ['one part', signature],
    ['two parts', `${header}.${payload}`],
    ['four parts', `${good}.${signature}`],
    ['an empty signature', `${header}.${payload}.`],
    ['a signature one character short', good.slice(0, -1)],
    ['a signature one character long', `${good}A`],
    ['padding', `${header}.${payload}.${signature.slice(0, -2)}==`],
    ['a character outside base64url', `${header}.${payload.slice(0, -1)}+.${signature}`],
    ['a signature outside base64url', `${header}.${payload}.${signature.slice(0, -1)}/`],
    ['a header of 4n+1 characters', `${header}A.${payload}.${signature}`],
    ['whitespace inside', `${header}.${payload.slice(0, 10)} ${payload.slice(10)}.${signature}`],
    ['a header that is not JSON', `${Buffer.from('{alg').toString('base64url')}.${payload}.${signature}`],
    ['a header that is an array', withHeader(['EdDSA'])],
    ['alg none', withHeader({ alg: 'none', kid: s.key.id })],
    ['alg HS256', withHeader({ alg: 'HS256', kid: s.key.id })],
    ['alg ES256', withHeader({ alg: 'ES256', kid: s.key.id })],
    ['no alg', withHeader({ kid: s.key.id })],
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
    ['over 8 KiB, signed', await s.token({ extra: { padding } })],
    ['expired, signed', await s.token({ iat: now - 7200, ttl: 3600 })],
    ['issued in the future, signed', await s.token({ iat: now + 600 })],
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

/** The token with its signature's 64 bytes replaced by what `change` makes of a copy of them. */
function withSignature(token: string, change: (signature: Buffer) => void): string {
  const dot = token.lastIndexOf('.');
  const signature = Buffer.from(token.slice(dot + 1), 'base64url');
  change(signature);
  return `${token.slice(0, dot + 1)}${signature.toString('base64url')}`;
}

/** The order of Ed25519's group: S and S + L are the same scalar, but only S < L is canonical. */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

/** Adds L to S, the signature's second half read as a little-endian integer (it fits: S + L < 2²⁵⁴). */
function addOrderToS(signature: Buffer): void {
  let scalar = 0n;
  for (let i = 63; i >= 32; i--) scalar = (scalar << 8n) | BigInt(signature[i]!);
  scalar += L;
  for (let i = 32; i < 64; i++, scalar >>= 8n) signature[i] = Number(scalar & 0xffn);
}

t.test('auth - a signature altered in one byte, made by an unregistered key, or with S + L in place of S is 401', async (t) => {
  const good = await s.token({ extra: { jti: 'signature-checks' } });
  const input = good.slice(0, good.lastIndexOf('.'));
  const stranger = generateKeyPairSync('ed25519').privateKey;
  const refused: Array<[string, string]> = [
    ['one byte of R altered', withSignature(good, (sig) => void (sig[7] = sig[7]! ^ 0x01))],
    ['one byte of S altered', withSignature(good, (sig) => void (sig[40] = sig[40]! ^ 0x80))],
    ['signed by a key that is not registered', `${input}.${sign(null, Buffer.from(input), stranger).toString('base64url')}`],
    ['S + L: the same scalar, not canonical', withSignature(good, addOrderToS)],
  ];
  const before = await verified();
  for (const [what, token] of refused) {
    t.not(token, good, what);
    const res = await whoami(token);
    t.equal(res.status, 401, what);
    t.equal(res.json.error.code, 'UNAUTHORIZED', what);
  }
  t.equal((await verified()) - before, refused.length, 'each refused by its signature check, none before it');
  t.equal((await whoami(good)).status, 200, 'the token they were made from is valid');
});

t.test('signature pool - checks queued in one turn go out together, at most 16 to a message, each answered for itself', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = Buffer.from((publicKey.export({ format: 'jwk' }) as { x: string }).x, 'base64url');
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
