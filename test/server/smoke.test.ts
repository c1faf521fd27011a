import t from 'tap';
import { startTestServer } from '../helpers/server.js';

t.test('server - whoami answers with the token org and key', async (t) => {
  const s = await startTestServer();
  t.teardown(async () => {
    await s.stop();
    s.cleanup();
  });
  const res = await s.api('GET', '/whoami');
  t.equal(res.status, 200);
  t.equal(res.json.org.slug, 'acme');
  t.equal(res.json.signing_key.id, s.key.id);
  t.same(res.json.scopes, ['admin']);
  t.equal(res.json.repo_ids, null);
  t.ok(res.headers.get('x-request-id'));
});
