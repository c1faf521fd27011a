import t from 'tap';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, ROOT, write } from './helpers.js';

/**
 * Authentication of git over HTTP (API §14): the token as HTTP Basic's password (any username)
 * or as a bearer token, verified like the API's, with the same scopes, restrictions and key state;
 * a missing or invalid one is 401 with a Basic challenge, so git asks its credential helper.
 */
const s = await serverForFile(t);
const git = gitClient(t);
await createRepo(s, 'demo');
await createRepo(s, 'other');
const tip = await write(s, 'demo', ROOT, { bookmark: 'main', files: { 'a.txt': 'a\n' } });
const infoRefs = `${s.url}/acme/demo.git/info/refs?service=git-upload-pack`;
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

t.test('git auth - no credentials: 401 with a Basic challenge, and git fails without hanging', async (t) => {
  const res = await fetch(infoRefs);
  t.equal(res.status, 401);
  t.equal(res.headers.get('www-authenticate'), 'Basic realm="repohost"');
  t.equal(((await res.json()) as any).error.code, 'UNAUTHORIZED');
  const post = await fetch(`${s.url}/acme/demo.git/git-upload-pack`, { method: 'POST', headers: { 'content-type': 'application/x-git-upload-pack-request' }, body: '0000' });
  t.equal(post.status, 401);
  t.equal(post.headers.get('www-authenticate'), 'Basic realm="repohost"');

  const clone = await git.run(['clone', cloneUrl(s, 'demo', null), join(git.dir, 'anonymous')]);
  t.not(clone.status, 0);
  t.match(clone.stderr, /Authentication failed|could not read Username|terminal prompts disabled/);
});

t.test('git auth - a bad password, a malformed header or an expired token is 401 with the challenge', async (t) => {
  const expired = await s.token({ iat: Math.floor(Date.now() / 1000) - 7200, ttl: 3600 });
  for (const authorization of [basic('x', 'not-a-token'), basic('x', ''), 'Basic !!!', `Basic ${Buffer.from('no-colon').toString('base64')}`, basic('x', expired), `Bearer ${expired}`]) {
    const res = await fetch(infoRefs, { headers: { authorization } });
    t.equal(res.status, 401, authorization.slice(0, 20));
    t.equal(res.headers.get('www-authenticate'), 'Basic realm="repohost"');
  }
});

t.test('git auth - a read-only token clones, as Basic password with any user name or as a bearer token', async (t) => {
  const token = await s.token({ scopes: ['read'] });
  const viaBasic = join(git.dir, 'basic');
  await git.ok(['clone', '--quiet', `http://anyone-at-all:${token}@127.0.0.1:${s.port}/acme/demo.git`, viaBasic]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: viaBasic }), tip.commit);
  const viaBearer = join(git.dir, 'bearer');
  await git.ok(['-c', `http.extraHeader=Authorization: Bearer ${token}`, 'clone', '--quiet', cloneUrl(s, 'demo', null), viaBearer]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: viaBearer }), tip.commit);
  const gitRead = join(git.dir, 'git-read');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'demo', await s.token({ scopes: ['git:read'] })), gitRead]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: gitRead }), tip.commit, 'git:read is enough');
});

t.test('git auth - a credential helper answers the challenge, keeping the token out of the URL', async (t) => {
  const token = await s.token({ scopes: ['read'] });
  const dir = join(git.dir, 'helper');
  const helper = `!f() { test "$1" = get && echo username=x && echo password=${token}; }; f`;
  await git.ok(['-c', `credential.helper=${helper}`, 'clone', '--quiet', cloneUrl(s, 'demo', null), dir]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), tip.commit);
  t.notMatch(await git.ok(['remote', 'get-url', 'origin'], { cwd: dir }), token, 'the token is not stored with the remote');
});

t.test('git auth - without git:read, for another repository, or for another org: 403', async (t) => {
  const repoRead = await s.token({ scopes: ['repo:read'] });
  const restricted = await s.token({ scopes: ['read'], repos: ['acme/other'] });
  s.createOrg('globex');
  const foreignKey = s.createKey({ scopes: ['admin'], org: 'globex' });
  const foreign = await s.token({ key: foreignKey, issuer: 'globex' });
  for (const [name, token] of [['repo:read only', repoRead], ['restricted to another repository', restricted], ['another org', foreign]] as const) {
    const res = await fetch(infoRefs, { headers: { authorization: basic('x', token) } });
    t.equal(res.status, 403, name);
    t.equal(((await res.json()) as any).error.code, 'FORBIDDEN');
    const clone = await git.run(['clone', cloneUrl(s, 'demo', token), join(git.dir, `denied-${name.replace(/\W+/g, '-')}`)]);
    t.not(clone.status, 0);
    t.match(clone.stderr, /403/, `${name}: git reports the 403`);
  }
  const missing = await fetch(`${s.url}/acme/nowhere.git/info/refs?service=git-upload-pack`, { headers: { authorization: basic('x', restricted) } });
  t.equal(missing.status, 403, 'a restricted token learns nothing of repositories outside its reach');
  const absent = await fetch(`${s.url}/acme/nowhere.git/info/refs?service=git-upload-pack`, { headers: { authorization: basic('x', await s.token({ scopes: ['read'] })) } });
  t.equal(absent.status, 404);
  t.equal(((await absent.json()) as any).error.code, 'REPO_NOT_FOUND');
});

t.test('git auth - revoking the key stops its tokens on the very next clone', async (t) => {
  const key = s.createKey({ scopes: ['read'] });
  const token = await s.token({ key, scopes: ['read'] });
  await git.ok(['clone', '--quiet', cloneUrl(s, 'demo', token), join(git.dir, 'before-revoke')]);
  const revoked = await s.cli(['key', 'revoke', key.id]);
  t.equal(revoked.code, 0, revoked.stderr);
  const res = await fetch(infoRefs, { headers: { authorization: basic('x', token) } });
  t.equal(res.status, 401);
  t.equal(res.headers.get('www-authenticate'), 'Basic realm="repohost"');
  const clone = await git.run(['clone', cloneUrl(s, 'demo', token), join(git.dir, 'after-revoke')]);
  t.not(clone.status, 0);
  t.match(clone.stderr, /Authentication failed/);
});
