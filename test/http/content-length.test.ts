import t, { type Test } from 'tap';
import { serverForFile } from '../helpers/server.js';
import { rawExchange, type RawExchange } from '../helpers/raw-http.js';

/**
 * Request framing by Content-Length over raw sockets (API §1 body limits, §12 envelope). uWS's
 * parser reads a length of at most nine digits; for anything else it closes the connection as soon
 * as the request callback returns, and for several Content-Length fields it reads the body by the
 * first. Each case must be answered — a status line within a couple of seconds — never a silent
 * close, a hang or a 5xx.
 */
const s = await serverForFile(t);
const token = await s.token();
const created = await s.api('POST', '/acme/repos', { body: { name: 'framing' }, token });
if (created.status !== 201) throw new Error(`repo create failed: ${created.status} ${created.text}`);

const MIB = 1024 * 1024;
const head = (method: string, path: string, lengths: string[], extra = ''): string =>
  `${method} ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\n` +
  lengths.map((l) => `content-length: ${l}\r\n`).join('') +
  extra +
  '\r\n';

/** The one answer to a request whose framing is refused: an error envelope, then the server closes. */
function expectRefused(t: Test, ex: RawExchange, status: number, code: string): Record<string, any> {
  t.equal(ex.responses.length, 1, 'exactly one response');
  const res = ex.responses[0]!;
  t.equal(res.status, status, `status ${status}`);
  const envelope = JSON.parse(res.body) as { error: Record<string, any> };
  t.equal(envelope.error.code, code);
  t.type(envelope.error.message, 'string');
  t.equal(res.headers['connection'], 'close', 'the response says the connection closes');
  t.ok(ex.closed, 'the server closes the connection');
  return envelope.error;
}

t.test('content-length - 2^31 and more is 413 PAYLOAD_TOO_LARGE with the route limit, also right at ten digits', async (t) => {
  const cases: Array<[string, string, number]> = [
    ['POST', '/v1/acme/repos', MIB],
    ['POST', '/v1/acme/framing/apply-ops', 700 * MIB],
    ['POST', '/v1/acme/framing/blobs', 512 * MIB],
  ];
  for (const [method, path, limit] of cases) {
    for (const length of ['2147483648', '1000000000', '18446744073709551616']) {
      const ex = await rawExchange(s.port, head(method, path, [length]), { timeoutMs: 3000 });
      const error = expectRefused(t, ex, 413, 'PAYLOAD_TOO_LARGE');
      t.same(error.details, { limit_bytes: limit }, `${path} with ${length}: limit ${limit}`);
    }
  }
  const fits = await rawExchange(s.port, head('POST', '/v1/acme/framing/apply-ops', ['999999999']), { timeoutMs: 3000 });
  t.equal(fits.responses[0]?.status, 413, 'nine digits over the limit are refused by the limit as before');
});

t.test('content-length - a huge length on a route without a body, unknown paths and healthz still get an answer', async (t) => {
  for (const [method, path] of [['GET', '/v1/acme/framing'], ['DELETE', '/v1/acme/framing'], ['GET', '/v1/acme/framing/no/such/route'], ['GET', '/healthz']] as const) {
    const ex = await rawExchange(s.port, head(method, path, ['2147483648']), { timeoutMs: 3000 });
    expectRefused(t, ex, 413, 'PAYLOAD_TOO_LARGE');
  }
  t.equal((await s.api('GET', '/acme/framing', { token })).status, 200, 'the repository is still there');
});

t.test('content-length - a refused request leaves no route behind for another path', async (t) => {
  // The route of `/v1/v1/acme` is looked up (for its body limit) as the path `/v1/acme`, which
  // is also a URL of its own: GET /{org} for acme, not GET /{org}/{repo} for an org named v1.
  for (const method of ['GET', 'PATCH']) {
    const ex = await rawExchange(s.port, head(method, '/v1/v1/acme', ['2147483648']), { timeoutMs: 3000 });
    expectRefused(t, ex, 413, 'PAYLOAD_TOO_LARGE');
  }
  const org = await s.api('GET', '/acme', { token });
  t.equal(org.status, 200, org.text);
  t.equal(org.json.slug, 'acme', 'GET /v1/acme is still the org');
});

t.test('content-length - a value that is not one decimal number is 400 INVALID_REQUEST and nothing is written', async (t) => {
  const body = JSON.stringify({ name: 'never-created' });
  const n = String(body.length);
  const values: string[][] = [['-1'], ['abc'], [`${n}x`], [`+${n}`], [`${n}, ${n}`], [`0x${body.length.toString(16)}`], [`${n}.0`], [''], [n, n], [n, '0']];
  for (const lengths of values) {
    const ex = await rawExchange(s.port, head('POST', '/v1/acme/repos', lengths) + body, { timeoutMs: 3000 });
    t.comment(`Content-Length ${JSON.stringify(lengths)}`);
    expectRefused(t, ex, 400, 'INVALID_REQUEST');
  }
  t.equal((await s.api('GET', '/acme/never-created', { token })).status, 404, 'no repository was created');
});

t.test('content-length - a body behind two lengths is never read as the next request', async (t) => {
  // By the first length there is no body, and the bytes after the head are a request of their own.
  const smuggled = `DELETE /v1/acme/framing HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n\r\n`;
  const ex = await rawExchange(s.port, head('GET', '/v1/acme/framing', ['0', String(smuggled.length)]) + smuggled, { timeoutMs: 3000 });
  expectRefused(t, ex, 400, 'INVALID_REQUEST');
  t.equal((await s.api('GET', '/acme/framing', { token })).status, 200, 'the repository was not deleted');
});

t.test('content-length - a valid length still frames keep-alive requests', async (t) => {
  const body = JSON.stringify({ name: 'framed' });
  const ex = await rawExchange(s.port, head('POST', '/v1/acme/repos', [`00${body.length}`]) + body, { expect: 1, timeoutMs: 3000 });
  t.equal(ex.responses[0]?.status, 201, 'leading zeros are still a decimal number');
  t.notOk(ex.closed, 'the connection stays open');
});

t.test('content-length - a body modestly over the limit, written whole before reading, still gets its 413 and keeps the connection', async (t) => {
  const body = JSON.stringify({ name: 'too-big', description: 'x'.repeat(MIB + 100 * 1024) });
  const next = `GET /v1/acme/framing HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n\r\n`;
  const ex = await rawExchange(s.port, head('POST', '/v1/acme/repos', [String(Buffer.byteLength(body))]) + body + next, { expect: 2, timeoutMs: 5000 });
  t.same(ex.responses.map((r) => r.status), [413, 200], 'the 413, then the next request on the same connection');
  t.equal(JSON.parse(ex.responses[0]!.body).error.code, 'PAYLOAD_TOO_LARGE');
  t.notOk(ex.closed, 'the connection stays open');
});
