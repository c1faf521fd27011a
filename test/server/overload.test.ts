import t from 'tap';
import { serverForFile } from '../helpers/server.js';

/** Bounded mailboxes (API §12 RATE_LIMITED): overload is refused early and cheaply, never a 5xx. */
const s = await serverForFile(t, { env: { REPOHOST_MAILBOX_LIMIT: '2' } });

t.test('overload - with a mailbox of 2, a burst gets 429 with Retry-After and no 5xx; accepted writes all landed', async (t) => {
  const token = await s.token();
  const results = await Promise.all(Array.from({ length: 120 }, (_, i) => s.api('POST', '/acme/repos', { token, body: { name: `burst-${i}` } })));
  const statuses = results.map((r) => r.status);
  const limited = results.filter((r) => r.status === 429);
  const created = results.filter((r) => r.status === 201);
  t.equal(statuses.filter((st) => st >= 500).length, 0, 'no 5xx');
  t.equal(limited.length + created.length, results.length, 'every answer is a 201 or a 429');
  t.ok(limited.length > 0, `${limited.length} refused with 429`);
  t.ok(created.length >= 2, `${created.length} accepted`);
  for (const r of limited) {
    t.equal(r.json.error.code, 'RATE_LIMITED');
    t.equal(r.headers.get('retry-after'), '1');
  }
  const list = await s.api('GET', '/acme/repos/list?pageSize=100', { token });
  t.equal(list.json.total, created.length, 'exactly the accepted creates exist');
  const names = new Set(list.json.repos.map((r: { name: string }) => r.name));
  t.ok(created.every((r) => names.has(r.json.name)));

  // Reads never queue in a mailbox, so they are not refused by a full one.
  const reads = await Promise.all(Array.from({ length: 50 }, () => s.api('GET', '/acme/repos?limit=1', { token })));
  t.same([...new Set(reads.map((r) => r.status))], [200]);
  // Once the burst is over, writes are accepted again.
  t.equal((await s.api('POST', '/acme/repos', { token, body: { name: 'after-burst' } })).status, 201);
});
