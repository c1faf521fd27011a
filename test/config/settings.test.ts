import t from 'tap';
import { connect } from 'node:net';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Settings that change request handling (API §13), and clients that leave mid-request. */
let s: TestServer;
/** Tokens here live 5 minutes: the server's cap is 10. */
const TTL = 300;

t.before(async () => {
  s = await startTestServer({ env: { REPOHOST_KEY_RATE_LIMIT: '5', REPOHOST_JWT_AUDIENCES: 'repohost,mesa-api', REPOHOST_JWT_MAX_TTL_S: '600' } });
});
t.teardown(async () => {
  await s.stop();
  s.cleanup();
});

t.test('settings - REPOHOST_JWT_AUDIENCES and REPOHOST_JWT_MAX_TTL_S', async (t) => {
  t.equal((await s.api('GET', '/whoami', { token: await s.token({ audience: 'mesa-api', ttl: 600 }) })).status, 200, 'a configured second audience');
  const other = await s.api('GET', '/whoami', { token: await s.token({ audience: 'elsewhere', ttl: TTL }) });
  t.equal(other.status, 401);
  const long = await s.api('GET', '/whoami', { token: await s.token({ ttl: 601 }) });
  t.equal(long.status, 401, 'a lifetime over the configured cap');
  t.equal(long.json.error.message, 'invalid access token');
});

t.test('settings - REPOHOST_KEY_RATE_LIMIT refuses a key over its rate with 429, other keys unaffected', async (t) => {
  const busyKey = s.createKey({ scopes: ['read'] });
  const calmKey = s.createKey({ scopes: ['read'] });
  const busy = await s.token({ key: busyKey, scopes: ['read'], ttl: TTL });
  const calm = await s.token({ key: calmKey, scopes: ['read'], ttl: TTL });
  const started = Date.now();
  const burst = await Promise.all(Array.from({ length: 30 }, () => s.api('GET', '/whoami', { token: busy })));
  const elapsedS = (Date.now() - started) / 1000;
  const limited = burst.filter((r) => r.status === 429);
  const accepted = burst.filter((r) => r.status === 200).length;
  t.equal(accepted + limited.length, 30, 'every answer is 200 or 429');
  // A second of burst, then 5 a second for as long as the burst took to arrive.
  t.ok(accepted >= 1 && accepted <= 5 + Math.ceil(5 * elapsedS), `${accepted} of 30 accepted in ${elapsedS.toFixed(2)} s`);
  t.ok(limited.length > 0, `${limited.length} of 30 refused`);
  for (const r of limited) {
    t.equal(r.json.error.code, 'RATE_LIMITED');
    t.equal(r.headers.get('retry-after'), '1');
  }
  t.equal((await s.api('GET', '/whoami', { token: calm })).status, 200, 'another key has its own budget');
  await new Promise((r) => setTimeout(r, 1100));
  t.equal((await s.api('GET', '/whoami', { token: busy })).status, 200, 'the budget refills');
});

t.test('aborted requests - a client that leaves mid-body or mid-request leaves the server serving', async (t) => {
  await new Promise((r) => setTimeout(r, 1100));
  const token = await s.token({ ttl: TTL });
  for (const partial of [`{"name":"aban`, '']) {
    const socket = connect(s.port, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write(`POST /v1/acme/repos HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n${partial}`);
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
  }
  await new Promise((r) => setTimeout(r, 200));
  t.equal((await s.api('GET', '/acme/aban', { token })).status, 404, 'nothing was created from half a body');
  t.equal((await s.api('POST', '/acme/repos', { token, body: { name: 'after-abort' } })).status, 201);
  t.notOk(s.logs.some((l) => l.includes('"level":"error"')), 'no error logged');
});
