import t, { type Test } from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { startTestServer, type TestKey, type TestServer } from '../helpers/server.js';

/** Authentication and authorization (API §2) through HTTP, with key changes made by the real CLI. */
let s: TestServer;
let allowedId: string;
let otherId: string;

t.before(async () => {
  s = await startTestServer();
  allowedId = (await s.api('POST', '/acme/repos', { body: { name: 'Allowed' } })).json.id;
  otherId = (await s.api('POST', '/acme/repos', { body: { name: 'other' } })).json.id;
});
t.teardown(async () => {
  await s.stop();
  s.cleanup();
});

function unregisteredKey(): TestKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { id: 'key_01J0000000000000000000000', privateKey, publicX: (publicKey.export({ format: 'jwk' }) as { x: string }).x };
}

function expect401(t: Test, res: { status: number; json: any }, code = 'UNAUTHORIZED'): void {
  t.equal(res.status, 401);
  t.equal(res.json.error.code, code);
  if (code === 'UNAUTHORIZED') t.equal(res.json.error.message, 'invalid access token');
}

function expect403(t: Test, res: { status: number; json: any }): void {
  t.equal(res.status, 403, res.json?.error?.message);
  t.equal(res.json.error.code, 'FORBIDDEN');
}

const whoami = (token: string) => s.api('GET', '/whoami', { token });

t.test('auth - missing, malformed and invalid tokens are 401 "invalid access token"', async (t) => {
  expect401(t, await s.api('GET', '/whoami', { token: '' }));
  expect401(t, await s.api('GET', '/whoami', { token: '', headers: { authorization: 'Basic dXNlcjpwYXNz' } }));
  expect401(t, await s.api('GET', '/whoami', { token: '', headers: { authorization: 'Bearer' } }));
  expect401(t, await whoami('garbage'));
  expect401(t, await whoami('a.b.c'));
  const now = Math.floor(Date.now() / 1000);
  expect401(t, await whoami(await s.token({ iat: now - 7200, ttl: 3600 })), 'UNAUTHORIZED');
  expect401(t, await whoami(await s.token({ audience: 'someone-else' })));
  expect401(t, await whoami(await s.token({ extra: { nbf: now + 600 } })));
  expect401(t, await whoami(await s.token({ iat: now + 600, ttl: 60 })), 'UNAUTHORIZED');
  expect401(t, await whoami(await s.token({ ttl: 14401 })), 'UNAUTHORIZED');
  t.equal((await whoami(await s.token({ ttl: 14400 }))).status, 200, 'exactly the 4 h cap is accepted');
  t.equal((await whoami(await s.token({ iat: now - 3590, ttl: 3600 }))).status, 200, 'within lifetime');
  t.equal((await whoami(await s.token({ iat: now - 3620, ttl: 3600 }))).status, 200, '30 s of clock skew');
  expect401(t, await whoami(await s.token({ repos: ['acme/Allowed'], repo_ids: [allowedId] })));
  expect401(t, await whoami(await s.token({ repo_ids: Array.from({ length: 251 }, (_, i) => `repo_${i}`) })));
  expect401(t, await whoami(await s.token({ extra: { scopes: 'admin' } })));
  const hs = await new SignJWT({ scopes: ['admin'] }).setProtectedHeader({ alg: 'HS256', kid: s.key.id }).setIssuer('acme').setAudience('repohost').setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode('x'.repeat(32)));
  expect401(t, await whoami(hs));
  // Signed by another registered key than the one its kid names: a bad signature, not an unknown key.
  const second = s.createKey({ scopes: ['admin'] });
  expect401(t, await whoami(await s.token({ key: { ...second, id: s.key.id } })));
  const withoutExp = await new SignJWT({ scopes: ['admin'] }).setProtectedHeader({ alg: 'EdDSA', kid: s.key.id }).setIssuer('acme').setAudience('repohost').setIssuedAt().sign(s.key.privateKey);
  expect401(t, await whoami(withoutExp));
  const tampered = (await s.token({ scopes: ['read'] })).split('.');
  tampered[1] = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(tampered[1]!, 'base64url').toString()), scopes: ['admin'] })).toString('base64url');
  expect401(t, await whoami(tampered.join('.')));
  t.equal((await s.api('GET', '/whoami', { token: '', headers: { authorization: `bearer ${await s.token()}` } })).status, 200, 'the scheme is case-insensitive');
});

t.test('auth - a token over 8 KiB is refused before it is decoded; one just under it works', async (t) => {
  const padded = async (chars: number): Promise<string> => {
    const base = await s.token({ extra: { pad: '' } });
    // Each padding character adds 4/3 of a character to the encoded payload.
    return s.token({ extra: { pad: 'x'.repeat(Math.floor(((chars - base.length) * 3) / 4)) } });
  };
  const fits = await padded(8 * 1024 - 8);
  t.ok(fits.length <= 8 * 1024, `${fits.length} characters`);
  t.equal((await whoami(fits)).status, 200);
  const over = await padded(8 * 1024 + 64);
  t.ok(over.length > 8 * 1024, `${over.length} characters`);
  expect401(t, await whoami(over));
  expect401(t, await whoami(await padded(40 * 1024)));
});

t.test('auth - an issuer or a restriction entry longer than any slug, name or id is refused, never a 500', async (t) => {
  const routes = ['/whoami', '/acme/repos', '/acme/webhook-targets'];
  for (const path of routes) {
    expect401(t, await s.api('GET', path, { token: await s.token({ issuer: 'a'.repeat(5000) }) }), 'JWT_UNKNOWN_PUBLIC_KEY');
    expect401(t, await s.api('GET', path, { token: await s.token({ repos: [`acme/${'b'.repeat(5000)}`] }) }));
    expect401(t, await s.api('GET', path, { token: await s.token({ repo_ids: ['c'.repeat(5000)] }) }));
  }
  expect401(t, await whoami(await s.token({ issuer: 'Acme' })), 'JWT_UNKNOWN_PUBLIC_KEY');
  const longest = await whoami(await s.token({ repos: [`acme/${'n'.repeat(100)}`], scopes: ['read'] }));
  t.equal(longest.status, 200, 'the longest name a repository can have is still a restriction');
  t.same(longest.json.repo_ids, []);
});

t.test('auth - a key not registered for the issuer is JWT_UNKNOWN_PUBLIC_KEY', async (t) => {
  const stranger = unregisteredKey();
  expect401(t, await whoami(await s.token({ key: stranger })), 'JWT_UNKNOWN_PUBLIC_KEY');
  expect401(t, await whoami(await s.token({ key: stranger, embedJwk: true })), 'JWT_UNKNOWN_PUBLIC_KEY');
  expect401(t, await whoami(await s.token({ issuer: 'no-such-org' })), 'JWT_UNKNOWN_PUBLIC_KEY');
  s.createOrg('elsewhere');
  const foreign = s.createKey({ scopes: ['admin'], org: 'elsewhere' });
  expect401(t, await whoami(await s.token({ key: foreign, issuer: 'acme' })), 'JWT_UNKNOWN_PUBLIC_KEY');
  expect401(t, await whoami(await s.token({ key: foreign, issuer: 'acme', embedJwk: true })), 'JWT_UNKNOWN_PUBLIC_KEY');
});

t.test('auth - a token may name its key by an embedded public JWK instead of kid', async (t) => {
  const res = await whoami(await s.token({ embedJwk: true }));
  t.equal(res.status, 200);
  t.equal(res.json.signing_key.id, s.key.id);
  const created = await s.api('POST', '/acme/repos', { token: await s.token({ embedJwk: true }), body: { name: 'by-jwk' } });
  t.equal(created.status, 201);
});

t.test('auth - disable, enable, scope change and revoke by the CLI apply on the very next request', async (t) => {
  const key = s.createKey({ scopes: ['write'], name: 'rotating' });
  const token = await s.token({ key, scopes: ['write'] });
  const jwkToken = await s.token({ key, scopes: ['write'], embedJwk: true });
  t.equal((await whoami(token)).status, 200, 'valid (and now cached)');

  const disabled = await s.cli(['key', 'disable', key.id, '--json']);
  t.equal(disabled.code, 0, disabled.stderr);
  t.equal(JSON.parse(disabled.stdout).status, 'disabled');
  expect401(t, await whoami(token));
  expect401(t, await whoami(jwkToken));

  t.equal((await s.cli(['key', 'enable', key.id])).code, 0);
  t.equal((await whoami(token)).status, 200, 're-enabled: the same token works again');

  t.equal((await s.api('POST', '/acme/repos', { token, body: { name: 'before-narrowing' } })).status, 201);
  const narrowed = await s.cli(['key', 'scopes', key.id, 'read']);
  t.equal(narrowed.code, 0, narrowed.stderr);
  expect403(t, await s.api('POST', '/acme/repos', { token, body: { name: 'after-narrowing' } }));
  t.same((await whoami(token)).json.scopes, ['read'], 'the token now acts as read');
  t.equal((await s.cli(['key', 'scopes', key.id, 'write'])).code, 0);

  const revoked = await s.cli(['key', 'revoke', key.id]);
  t.equal(revoked.code, 0, revoked.stderr);
  expect401(t, await whoami(token));
  expect401(t, await s.api('POST', '/acme/repos', { token, body: { name: 'after-revoke' } }));
  const reenable = await s.cli(['key', 'enable', key.id]);
  t.not(reenable.code, 0, 'revoking is final');
  t.match(reenable.stderr, /revoked/);
  expect401(t, await whoami(token));
  const listed = JSON.parse((await s.cli(['key', 'list', '--org', 'acme', '--json'])).stdout) as { keys: Array<{ id: string; status: string; revoked_at: string | null }> };
  const rec = listed.keys.find((k) => k.id === key.id)!;
  t.equal(rec.status, 'revoked');
  t.type(rec.revoked_at, 'string');
});

t.test('permissions - the intersection of token and key scopes; an admin token on a write key acts as write', async (t) => {
  const writeKey = s.createKey({ scopes: ['write'] });
  const adminOnWrite = await s.token({ key: writeKey, scopes: ['admin'] });
  t.same((await whoami(adminOnWrite)).json.scopes, ['write']);
  t.equal((await s.api('POST', '/acme/repos', { token: adminOnWrite, body: { name: 'by-admin-on-write' } })).status, 201);
  expect403(t, await s.api('GET', '/acme/webhook-targets', { token: adminOnWrite }));
  t.equal((await s.api('GET', '/acme/webhook-targets')).status, 200, 'an admin token on an admin key reaches admin routes');
  const readToken = await s.token({ scopes: ['read'] });
  expect403(t, await s.api('POST', '/acme/repos', { token: readToken, body: { name: 'nope' } }));
  expect403(t, await s.api('PATCH', '/acme/other', { token: readToken, body: { tags: { a: 'b' } } }));
  expect403(t, await s.api('DELETE', '/acme/other', { token: readToken }));
  expect403(t, await s.api('DELETE', '/acme/does-not-exist', { token: readToken }));
  t.equal((await s.api('GET', '/acme/other', { token: readToken })).status, 200);
  const readKey = s.createKey({ scopes: ['read'] });
  const writeOnRead = await s.token({ key: readKey, scopes: ['write'] });
  expect403(t, await s.api('POST', '/acme/repos', { token: writeOnRead, body: { name: 'nope' } }));
  const noScopes = await s.token({ key: readKey, extra: { scopes: undefined } });
  t.same((await whoami(noScopes)).json.scopes, ['read'], 'a token without scopes acts with its key\'s');
  const unknownScope = await s.token({ scopes: ['superuser'] });
  expect403(t, await s.api('GET', '/acme', { token: unknownScope }));
  // Names that exist on every JavaScript object are unknown scopes like any other.
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    const token = await s.token({ scopes: [name] });
    expect403(t, await s.api('GET', '/acme', { token }));
    t.same((await whoami(await s.token({ scopes: [name, 'read'] }))).json.scopes, ['read'], `${name} grants nothing`);
  }
});

t.test('query strings - keys that exist on every JavaScript object are unknown parameters', async (t) => {
  for (const key of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    const res = await s.api('GET', `/acme/repos?${key}=1`);
    t.equal(res.status, 400, key);
    t.match(res.json.error.message, /unknown query parameter/, key);
  }
});

t.test('permissions - alias scopes keep their narrow meanings', async (t) => {
  const as = async (scopes: string[]) => s.token({ scopes });
  const repoRead = await as(['repo:read']);
  t.equal((await s.api('GET', '/acme', { token: repoRead })).status, 200);
  t.equal((await s.api('GET', '/acme/repos', { token: repoRead })).status, 200);
  t.equal((await s.api('GET', '/acme/repos/list', { token: repoRead })).status, 200);
  t.equal((await s.api('GET', '/acme/other', { token: repoRead })).status, 200);
  t.equal((await whoami(repoRead)).status, 200);
  expect403(t, await s.api('POST', '/acme/repos', { token: repoRead, body: {} }));
  expect403(t, await s.api('PATCH', '/acme/other', { token: repoRead, body: {} }));
  expect403(t, await s.api('GET', '/acme/other/bookmarks', { token: repoRead }));

  const gitRead = await as(['git:read']);
  t.equal((await s.api('GET', '/acme/other', { token: gitRead })).status, 200);
  t.equal((await s.api('GET', '/acme/other/bookmarks', { token: gitRead })).status, 200, 'git:read reads bookmarks');
  expect403(t, await s.api('POST', '/acme/repos', { token: gitRead, body: {} }));

  const gitWrite = await as(['git:write']);
  t.equal((await s.api('GET', '/acme/other', { token: gitWrite })).status, 200);
  expect403(t, await s.api('POST', '/acme/repos', { token: gitWrite, body: {} }));
  expect403(t, await s.api('PATCH', '/acme/other', { token: gitWrite, body: {} }));
  expect403(t, await s.api('DELETE', '/acme/other', { token: gitWrite }));

  const repoCreate = await as(['repo:create']);
  const made = await s.api('POST', '/acme/repos', { token: repoCreate, body: { name: 'made-by-create-scope' } });
  t.equal(made.status, 201);
  expect403(t, await s.api('GET', '/acme/made-by-create-scope', { token: repoCreate }));
  expect403(t, await s.api('DELETE', '/acme/made-by-create-scope', { token: repoCreate }));

  const repoDelete = await as(['repo:delete']);
  expect403(t, await s.api('GET', '/acme/made-by-create-scope', { token: repoDelete }));
  expect403(t, await s.api('POST', '/acme/repos', { token: repoDelete, body: {} }));
  t.equal((await s.api('DELETE', '/acme/made-by-create-scope', { token: repoDelete })).status, 200);

  const both = await as(['repo:read', 'repo:create']);
  t.same((await whoami(both)).json.scopes.sort(), ['repo:create', 'repo:read']);
});

t.test('restrictions - repos / repo_ids: 403 outside (even for missing repositories), lists and counts filtered', async (t) => {
  const byName = await s.token({ repos: ['acme/allowed'] });
  const byId = await s.token({ repo_ids: [allowedId] });
  for (const token of [byName, byId]) {
    t.equal((await s.api('GET', '/acme/Allowed', { token })).status, 200);
    expect403(t, await s.api('GET', '/acme/other', { token }));
    expect403(t, await s.api('PATCH', '/acme/other', { token, body: {} }));
    expect403(t, await s.api('GET', '/acme/never-existed', { token }));
    const list = await s.api('GET', '/acme/repos', { token });
    t.same(list.json.repos.map((r: { id: string }) => r.id), [allowedId]);
    const numbered = await s.api('GET', '/acme/repos/list', { token });
    t.equal(numbered.json.total, 1);
    t.same(numbered.json.repos.map((r: { id: string }) => r.id), [allowedId]);
    t.equal((await s.api('GET', '/acme', { token })).json.num_repos, 1, 'GET /{org} counts only allowed repositories');
    t.same((await whoami(token)).json.repo_ids, [allowedId]);
  }
  // A name restriction may name a repository that does not exist yet: that is a plain 404.
  const future = await s.token({ repos: ['acme/future'] });
  t.equal((await s.api('GET', '/acme/future', { token: future })).status, 404);
  t.same((await whoami(future)).json.repo_ids, []);
  t.equal((await s.api('GET', '/acme', { token: future })).json.num_repos, 0);
  // Other orgs' names never match.
  const foreignName = await s.token({ repos: ['elsewhere/other'] });
  expect403(t, await s.api('GET', '/acme/other', { token: foreignName }));

  // The key's own restriction narrows every token it signs.
  const keyCli = await s.cli(['key', 'create', '--org', 'acme', '--scopes', 'write', '--repos', 'Allowed', '--json']);
  t.equal(keyCli.code, 0, keyCli.stderr);
  const restrictedKey = JSON.parse(keyCli.stdout) as { id: string; repo_ids: string[]; private_key_pem: string };
  t.same(restrictedKey.repo_ids, [allowedId]);
  const { createPrivateKey } = await import('node:crypto');
  const key: TestKey = { id: restrictedKey.id, privateKey: createPrivateKey(restrictedKey.private_key_pem), publicX: '' };
  const wide = await s.token({ key, scopes: ['write'] });
  t.equal((await s.api('GET', '/acme/allowed', { token: wide })).status, 200);
  expect403(t, await s.api('GET', '/acme/other', { token: wide }));
  expect403(t, await s.api('GET', '/acme/missing-one', { token: wide }));
  t.equal((await s.api('GET', '/acme', { token: wide })).json.num_repos, 1);
  const disjoint = await s.token({ key, scopes: ['write'], repo_ids: [otherId] });
  expect403(t, await s.api('GET', '/acme/allowed', { token: disjoint }));
  t.same((await whoami(disjoint)).json.repo_ids, [], 'key and token restrictions intersect');
  t.equal((await s.api('GET', '/acme', { token: disjoint })).json.num_repos, 0, 'and GET /{org} counts the intersection');

  // Names resolve at each request: after a rename the old name no longer reaches the repository.
  const renameToken = await s.token({ repos: ['acme/rename-me'] });
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'rename-me' } })).status, 201);
  t.equal((await s.api('GET', '/acme/rename-me', { token: renameToken })).status, 200);
  t.equal((await s.api('PATCH', '/acme/rename-me', { body: { name: 'renamed' } })).status, 200);
  expect403(t, await s.api('GET', '/acme/renamed', { token: renameToken }));
});

t.test('restrictions - a restricted token creates no repositories and learns no names through create or rename', async (t) => {
  const byName = await s.token({ repos: ['acme/allowed', 'acme/wished-for'] });
  const byId = await s.token({ repo_ids: [allowedId] });
  for (const token of [byName, byId]) {
    expect403(t, await s.api('POST', '/acme/repos', { token, body: { name: 'wished-for' } }));
    expect403(t, await s.api('POST', '/acme/repos', { token, body: { name: 'other' } }));
    expect403(t, await s.api('POST', '/acme/repos', { token, body: {} }));
    expect403(t, await s.api('PATCH', '/acme/Allowed', { token, body: { name: 'other' } }));
  }
  t.equal((await s.api('GET', '/acme/wished-for')).status, 404, 'nothing was created');
  expect403(t, await s.api('PATCH', '/acme/Allowed', { token: byName, body: { name: 'somewhere-else' } }));
  t.equal((await s.api('PATCH', '/acme/Allowed', { token: byName, body: { name: 'ALLOWED' } })).status, 200, 'a name still within reach');
  const renamed = await s.api('PATCH', '/acme/allowed', { token: byId, body: { name: 'allowed-by-id' } });
  t.equal(renamed.status, 200, 'an id restriction keeps reaching the renamed repository');
  t.equal((await s.api('PATCH', '/acme/allowed-by-id', { token: byId, body: { name: 'Allowed' } })).status, 200);
  const unrestricted = await s.api('PATCH', '/acme/Allowed', { body: { name: 'other' } });
  t.equal(unrestricted.status, 409, 'an unrestricted token still learns of the clash');
  t.equal(unrestricted.json.error.code, 'REPO_EXISTS');
});

t.test('orgs - a token for one org gets 403 on another, without learning what exists there', async (t) => {
  const foreign = s.createKey({ scopes: ['admin'], org: 'elsewhere' });
  const token = await s.token({ key: foreign, issuer: 'elsewhere' });
  t.equal((await whoami(token)).json.org.slug, 'elsewhere');
  expect403(t, await s.api('GET', '/acme', { token }));
  expect403(t, await s.api('GET', '/acme/repos', { token }));
  expect403(t, await s.api('GET', '/acme/other', { token }));
  expect403(t, await s.api('GET', '/acme/never-existed', { token }));
  expect403(t, await s.api('POST', '/acme/repos', { token, body: { name: 'intruder' } }));
  expect403(t, await s.api('GET', '/no-such-org/repos', { token }));
  t.equal((await s.api('GET', '/elsewhere', { token })).status, 200);
});
