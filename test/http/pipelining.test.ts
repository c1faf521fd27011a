import t, { type Test } from 'tap';
import { serverForFile } from '../helpers/server.js';
import { rawConnection, rawExchange, type RawExchange } from '../helpers/raw-http.js';

/**
 * HTTP/1.1 pipelining over raw sockets. uWS closes a connection when it parses a request while
 * the previous response is still pending. So a request read while an answer is pending must wait
 * unread until that answer is written, and when uWS closes the connection anyway (both requests
 * arrived in one read), no write may have been applied without its response.
 */
const s = await serverForFile(t);
const token = await s.token();
const ROOT = 'z'.repeat(32);
for (const name of ['pipe', 'doomed']) {
  const created = await s.api('POST', '/acme/repos', { body: { name }, token });
  if (created.status !== 201) throw new Error(`repo create failed: ${created.status} ${created.text}`);
}

const request = (method: string, path: string, id: string, body?: unknown, extra: Record<string, string> = {}): string => {
  const text = body === undefined ? '' : JSON.stringify(body);
  const headers = { host: 'x', authorization: `Bearer ${token}`, 'x-request-id': id, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }), ...extra };
  return `${method} ${path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${text}`;
};
/** A write of one file that creates bookmark `name`, which shows whether it was applied. */
const writeBody = (name: string): unknown => ({ base_change_id: ROOT, bookmarks: [{ name, create: true }], ops: [{ op: 'write', path: `${name}.md`, content: name }] });
let barriers = 0;
/**
 * Waits until every command already sent to the actor of `pipe` (or of the org) has run: commands
 * to one actor run in order, so the answer to a later one comes after them.
 */
async function settled(actor: 'pipe' | 'org'): Promise<void> {
  const name = `barrier-${++barriers}`;
  const res = actor === 'pipe' ? await s.api('POST', '/acme/pipe/apply-ops', { body: writeBody(name), token }) : await s.api('POST', '/acme/repos', { body: { name }, token });
  if (res.status !== 201) throw new Error(`barrier write failed: ${res.status} ${res.text}`);
}
const bookmarkExists = async (name: string): Promise<boolean> => (await s.api('GET', `/acme/pipe/bookmarks/${name}`, { token })).status === 200;
const repoExists = async (name: string): Promise<boolean> => (await s.api('GET', `/acme/${name}`, { token })).status === 200;

/** Responses arrive in request order, each a success; a write without one must not be there. */
async function expectAnsweredOrUnapplied(t: Test, ex: RawExchange, actor: 'pipe' | 'org', writes: Array<{ id: string; applied: () => Promise<boolean> }>): Promise<void> {
  await settled(actor);
  const ids = ex.responses.map((r) => r.headers['x-request-id']);
  t.same(ids, writes.slice(0, ids.length).map((w) => w.id), `responses in request order (${ids.join(', ') || 'none'})`);
  for (const r of ex.responses) t.ok(r.status >= 200 && r.status < 300, `${r.headers['x-request-id']} → ${r.status} ${r.body.slice(0, 120)}`);
  for (const w of writes) {
    const answered = ids.includes(w.id);
    t.equal(await w.applied(), answered, `${w.id} ${answered ? 'answered and applied' : 'unanswered and not applied'}`);
  }
}

t.test('pipelining - two writes in one packet: none is applied without its response (streamed and buffered bodies)', async (t) => {
  const ops = await rawExchange(s.port, request('POST', '/v1/acme/pipe/apply-ops', 'w1', writeBody('p1')) + request('POST', '/v1/acme/pipe/apply-ops', 'w2', writeBody('p2')), { expect: 2 });
  await expectAnsweredOrUnapplied(t, ops, 'pipe', [
    { id: 'w1', applied: () => bookmarkExists('p1') },
    { id: 'w2', applied: () => bookmarkExists('p2') },
  ]);
  const creates = await rawExchange(s.port, request('POST', '/v1/acme/repos', 'c1', { name: 'c1' }) + request('POST', '/v1/acme/repos', 'c2', { name: 'c2' }), { expect: 2 });
  await expectAnsweredOrUnapplied(t, creates, 'org', [
    { id: 'c1', applied: () => repoExists('c1') },
    { id: 'c2', applied: () => repoExists('c2') },
  ]);
});

t.test('pipelining - a write without a body and a read behind it in one packet: the write is applied only with its response', async (t) => {
  const ex = await rawExchange(s.port, request('DELETE', '/v1/acme/doomed', 'd1') + request('GET', '/v1/acme/pipe', 'g1'), { expect: 2 });
  t.equal(ex.responses[0]?.headers['x-request-id'] ?? 'd1', 'd1', 'the delete is answered first if at all');
  await settled('org');
  t.equal(await repoExists('doomed'), !ex.responses.some((r) => r.headers['x-request-id'] === 'd1'), 'deleted if and only if answered');
});

t.test('pipelining - a request sent while the previous answer is pending is read after it: both answered in order, both applied', async (t) => {
  // The first request on `b` waits for connection `a`, which holds the same Idempotency-Key while
  // its body is incomplete: so it is pending for as long as this test wants.
  const held = JSON.stringify(writeBody('p3'));
  const withKey = { 'idempotency-key': 'pipelining-held' };
  const a = await rawConnection(s.port);
  const full = request('POST', '/v1/acme/pipe/apply-ops', 'a1', writeBody('p3'), withKey);
  a.write(full.slice(0, -1));
  await a.serverRead();

  const b = await rawConnection(s.port);
  b.write(request('POST', '/v1/acme/pipe/apply-ops', 'b1', JSON.parse(held), withKey));
  await b.serverRead();
  b.write(request('POST', '/v1/acme/pipe/apply-ops', 'b2', writeBody('p4')));
  t.notOk(await bookmarkExists('p3'), 'the first write is still pending');

  a.write(full.slice(-1));
  const first = await a.collect(1);
  t.equal(first.responses[0]?.status, 201, 'the key holder is answered');
  const ex = await b.collect(2);
  t.same(ex.responses.map((r) => `${r.headers['x-request-id']} ${r.status}`), ['b1 201', 'b2 201'], 'both answered, in order');
  t.notOk(ex.closed, 'the connection stays open');
  t.ok(await bookmarkExists('p3'), 'the first write is there');
  t.ok(await bookmarkExists('p4'), 'the second write is there');
});

t.test('pipelining - reads answered at once come back in order on one connection', async (t) => {
  const ids = ['r1', 'r2', 'r3', 'r4'];
  const ex = await rawExchange(s.port, ids.map((id) => request('GET', '/v1/acme/pipe', id)).join(''), { expect: ids.length });
  t.same(ex.responses.map((r) => `${r.headers['x-request-id']} ${r.status}`), ids.map((id) => `${id} 200`));
});
