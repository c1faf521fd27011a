import t from 'tap';
import { startGitServer } from '../helpers/git-server.js';
import { GIT_PASSWORD, GIT_USER, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv } from './fixtures.js';

t.test('credentials - a stored credential is never presented to a host the upstream url moved to', async (t) => {
  const env = await startSyncEnv();
  t.teardown(() => env.close());
  // A second upstream host, on another port: another origin. It accepts the same user, so a
  // credential sent to it would be seen (and would succeed).
  const other = await startGitServer({ users: { [GIT_USER]: GIT_PASSWORD } });
  t.teardown(() => other.close());
  const up = await makeUpstream(env.git, 'origin-a');
  const moved = await makeUpstream(other, 'origin-b');

  await createRepo(env.s, 'mover', { url: up.url, auth: passwordAuth });
  t.equal((await pullAndWait(env.s, 'mover')).status, 'completed', 'the credential works where it was given');

  const patched = await env.s.api('PATCH', '/acme/mover', { body: { upstream: { url: moved.url } } });
  t.equal(patched.status, 200);
  t.equal(patched.json.upstream.auth_kind, null, 'the new origin starts without the stored credential');
  const sync = await pullAndWait(env.s, 'mover');
  t.equal(sync.status, 'failed', 'the new host refuses the anonymous fetch');
  t.same(other.requests.map((r) => r.user), other.requests.map(() => null), 'no request to the new host carried a credential');
  t.ok(other.requests.length > 0, 'the sync did reach the new host');

  const given = await env.s.api('PATCH', '/acme/mover', { body: { upstream: { url: moved.url, auth: passwordAuth } } });
  t.equal(given.json.upstream.auth_kind, 'username_password');
  t.equal((await pullAndWait(env.s, 'mover')).status, 'completed', 'a credential given with the new url is used');
});
