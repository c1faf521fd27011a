import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { runCli, serverForFile } from '../helpers/server.js';

/** The `repohost` command (API §13), run as a real process against the data directory of a running server. */
const s = await serverForFile(t);

const json = (stdout: string): any => {
  const lines = stdout.trim().split('\n');
  if (lines.length !== 1) throw new Error(`--json must print exactly one line, got ${lines.length}`);
  return JSON.parse(lines[0]!);
};

t.test('cli - org create prints {id, slug, name}; bad, reserved and duplicate slugs fail', async (t) => {
  const made = await s.cli(['org', 'create', 'beta', '--name', 'Beta Inc', '--json']);
  t.equal(made.code, 0, made.stderr);
  const org = json(made.stdout);
  t.same(Object.keys(org).sort(), ['id', 'name', 'slug']);
  t.match(org.id, /^org_/);
  t.same([org.slug, org.name], ['beta', 'Beta Inc']);
  const human = await s.cli(['org', 'create', 'beta-two']);
  t.equal(human.code, 0);
  t.match(human.stdout, /created org beta-two \(org_/);
  const slugs = ['Bad_Slug', '-x', 'metrics', 'v1', 'x'.repeat(65)];
  const refused = await Promise.all(slugs.map((slug) => s.cli(['org', 'create', slug])));
  refused.forEach((res, i) => {
    t.equal(res.code, 1, `${slugs[i]} refused`);
    t.match(res.stderr, /^repohost: /);
  });
  const dup = await s.cli(['org', 'create', 'beta']);
  t.equal(dup.code, 1);
  t.match(dup.stderr, /already exists/);
});

t.test('cli - key create, list and token work against the running server', async (t) => {
  const made = await s.cli(['key', 'create', '--org', 'beta', '--scopes', 'read,write', '--json']);
  t.equal(made.code, 0, made.stderr);
  const key = json(made.stdout);
  t.same(Object.keys(key).sort(), ['id', 'name', 'org', 'private_key_jwk', 'private_key_pem', 'public_key_jwk', 'repo_ids', 'scopes']);
  t.match(key.id, /^key_/);
  t.equal(key.org, 'beta');
  t.match(key.name, /^key-\d{4}-\d\d-\d\d$/, 'name defaults to key-<date>');
  t.same(key.scopes, ['read', 'write']);
  t.equal(key.repo_ids, null);
  t.match(key.private_key_pem, /^-----BEGIN PRIVATE KEY-----/);
  t.same(Object.keys(key.public_key_jwk).sort(), ['crv', 'kty', 'x']);
  t.equal(key.private_key_jwk.x, key.public_key_jwk.x);
  t.type(key.private_key_jwk.d, 'string');

  const listed = await s.cli(['key', 'list', '--org', 'beta', '--json']);
  t.equal(listed.code, 0);
  const entry = json(listed.stdout).keys.find((k: { id: string }) => k.id === key.id);
  t.same(entry.status, 'active');
  t.notMatch(listed.stdout, /PRIVATE KEY|"d"/, 'the list never shows private material');
  const human = await s.cli(['key', 'list', '--org', 'beta']);
  t.match(human.stdout, new RegExp(`${key.id}\\tactive\\tread,write`));

  const jsonFile = join(s.dataDir, 'beta-key.json');
  writeFileSync(jsonFile, made.stdout, { mode: 0o600 });
  const tok = await s.cli(['token', '--key', jsonFile, '--org', 'beta', '--json']);
  t.equal(tok.code, 0, tok.stderr);
  const { token, expires_at } = json(tok.stdout);
  t.equal(decodeProtectedHeader(token).kid, key.id, 'the JSON key file gives a kid');
  t.ok(Math.abs(Date.parse(expires_at) - Date.now() - 3600_000) < 60_000, 'default ttl 1 h');
  const who = await s.api('GET', '/whoami', { token });
  t.equal(who.status, 200, 'a key and org made by the CLI while the server runs work at once');
  t.equal(who.json.org.slug, 'beta');
  t.same(who.json.scopes, ['write']);

  const pemFile = join(s.dataDir, 'beta-key.pem');
  writeFileSync(pemFile, key.private_key_pem, { mode: 0o600 });
  const pemTok = await s.cli(['token', '--key', pemFile, '--org', 'beta', '--scopes', 'read', '--ttl', '120', '--author', 'Ada Lovelace <ada@example.com>', '--author', 'Bot', '--repos', 'r1,beta/r2']);
  t.equal(pemTok.code, 0, pemTok.stderr);
  const raw = pemTok.stdout.trim();
  t.equal(decodeProtectedHeader(raw).jwk?.x, key.public_key_jwk.x, 'a PEM key embeds its public JWK');
  const claims = decodeJwt(raw);
  t.same(claims.scopes, ['read']);
  t.same(claims.repos, ['beta/r1', 'beta/r2']);
  t.same(claims.author, [['Ada Lovelace', 'ada@example.com'], ['Bot', null]]);
  t.equal(claims.exp! - claims.iat!, 120);
  t.equal(claims.iss, 'beta');
  t.equal(claims.aud, 'repohost');
  const whoPem = await s.api('GET', '/whoami', { token: raw });
  t.equal(whoPem.status, 200);
  t.same(whoPem.json.scopes, ['read']);
  t.same(whoPem.json.repo_ids, []);

  const badTokens = await Promise.all([['--ttl', '0'], ['--ttl', 'soon']].map((args) => s.cli(['token', '--key', jsonFile, '--org', 'beta', ...args])));
  t.same(badTokens.map((r) => r.code), [1, 1], 'a ttl must be a positive number of seconds');
  t.equal((await s.cli(['token', '--org', 'beta'])).code, 1, '--key is required');
});

t.test('cli - key create refuses bad input; --repos restricts the key', async (t) => {
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'Only' } })).status, 201);
  const badArgs = [
    ['--scopes', 'read'],
    ['--org', 'acme'],
    ['--org', 'acme', '--scopes', 'root'],
    ['--org', 'nope', '--scopes', 'read'],
    ['--org', 'acme', '--scopes', 'read', '--repos', 'missing'],
    ['--org', 'acme', '--scopes', 'read', '--repos', 'beta/only'],
    ['--org', 'acme', '--scopes', 'read', '--name', 'n'.repeat(129)],
  ];
  const refusals = await Promise.all(badArgs.map((args) => s.cli(['key', 'create', ...args])));
  refusals.forEach((res, i) => {
    t.equal(res.code, 1, badArgs[i]!.join(' '));
    t.match(res.stderr, /^repohost: /);
  });
  const restricted = await s.cli(['key', 'create', '--org', 'acme', '--scopes', 'repo:read', '--repos', 'only', '--name', 'ci-reader', '--json']);
  t.equal(restricted.code, 0, restricted.stderr);
  const k = json(restricted.stdout);
  t.equal(k.name, 'ci-reader');
  t.same(k.scopes, ['repo:read']);
  t.same(k.repo_ids, [(await s.api('GET', '/acme/only')).json.id]);
  const human = await s.cli(['key', 'create', '--org', 'acme', '--scopes', 'read']);
  t.equal(human.code, 0);
  t.match(human.stdout, /^key key_\S+ \(key-\d{4}-\d\d-\d\d\) scopes=read\n/);
  t.match(human.stdout, /BEGIN PRIVATE KEY/);
});

t.test('cli - key tags and key scopes', async (t) => {
  const k = json((await s.cli(['key', 'create', '--org', 'acme', '--scopes', 'write', '--json'])).stdout);
  const set = await s.cli(['key', 'tags', k.id, 'team=infra', 'env=prod', '--json']);
  t.equal(set.code, 0, set.stderr);
  t.same(json(set.stdout), { id: k.id, tags: { team: 'infra', env: 'prod' } });
  const removed = await s.cli(['key', 'tags', k.id, 'env=', 'owner=a=b']);
  t.equal(removed.code, 0);
  t.same(removed.stdout.trim().split('\n').sort(), ['owner=a=b', 'team=infra'], 'empty value removes; values may contain "="');
  const badTags = await Promise.all([[k.id, '$bad=1'], [k.id, 'noequals'], ['key_missing', 'a=b'], [k.id, '__proto__=x']].map((args) => s.cli(['key', 'tags', ...args])));
  t.same(badTags.map((r) => r.code), [1, 1, 1, 1], '$ keys, pairs without "=", unknown keys and __proto__ are refused');
  const scoped = await s.cli(['key', 'scopes', k.id, 'git:read,repo:create', '--json']);
  t.equal(scoped.code, 0);
  t.same(json(scoped.stdout).scopes, ['git:read', 'repo:create']);
  t.equal((await s.cli(['key', 'scopes', k.id, 'everything'])).code, 1);
  const listed = json((await s.cli(['key', 'list', '--org', 'acme', '--json'])).stdout).keys.find((x: { id: string }) => x.id === k.id);
  t.same(listed.tags, { team: 'infra', owner: 'a=b' });
  t.same(listed.scopes, ['git:read', 'repo:create']);
});

t.test('cli - usage, unknown commands and REPOHOST_DATA', async (t) => {
  const [none, help, unknown, explode, bogus] = await Promise.all([[], ['--help'], ['frobnicate'], ['key', 'explode'], ['org', 'create', 'x', '--bogus-flag']].map((args) => runCli(args)));
  t.equal(none!.code, 2);
  t.match(none!.stdout, /usage: repohost/);
  t.equal(help!.code, 0);
  t.match(help!.stdout, /key create --org/);
  t.equal(unknown!.code, 2);
  t.match(unknown!.stderr, /unknown command "frobnicate"/);
  t.equal(explode!.code, 2);
  t.equal(bogus!.code, 1, 'unknown flags are refused');
  const viaEnv = await runCli(['org', 'create', 'from-env', '--json'], { REPOHOST_DATA: s.dataDir });
  t.equal(viaEnv.code, 0, viaEnv.stderr);
  const listed = await s.cli(['key', 'create', '--org', 'from-env', '--scopes', 'read', '--json']);
  t.equal(listed.code, 0, 'the org made through REPOHOST_DATA is in the same data directory');
});

t.test('cli - serve refuses a data directory another server is serving, and a port another server listens on', async (t) => {
  const serve = (data: string, port: number) => runCli(['serve', '--host', '127.0.0.1', '--port', String(port), '--metrics-addr', '127.0.0.1:0', '--data', data], {}, 15_000);
  const sameDir = await serve(s.dataDir, 0);
  t.same([sameDir.code, sameDir.signal], [1, null], 'exits at once with an error');
  t.match(sameDir.stdout, /another repohost server is already serving/);

  const other = mkdtempSync(join(tmpdir(), 'repohost-test-'));
  t.teardown(() => rmSync(other, { recursive: true, force: true }));
  const samePort = await serve(other, s.port);
  t.same([samePort.code, samePort.signal], [1, null], 'exits at once with an error');
  t.match(samePort.stdout, /cannot listen on 127\.0\.0\.1:\d+: the port is in use/);

  for (let i = 0; i < 20; i++) t.equal((await fetch(`${s.url}/healthz`)).status, 200, 'every connection still reaches the running server');
});
