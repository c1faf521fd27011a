import t from 'tap';
import { connect } from 'node:net';
import { Client } from 'undici';
import { startTestServer } from '../helpers/server.js';
import { checkRepositories } from '../helpers/consistency.js';

/** Graceful shutdown (API §13): stop accepting, say "draining", finish in-flight work, exit 0. */

t.test('shutdown - SIGINT drains like SIGTERM: healthz says draining, new requests get 503, the in-flight request completes, exit 0', async (t) => {
  const s = await startTestServer();
  t.teardown(() => s.cleanup());
  const token = await s.token();
  const client = new Client(s.url, { pipelining: 1, keepAliveTimeout: 60_000 });
  t.teardown(() => client.destroy());
  const onKeptConnection = async (method: 'GET' | 'POST', path: string, body?: string) => {
    const res = await client.request({ method, path, body, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  };
  t.equal((await onKeptConnection('GET', '/healthz')).text, 'ok');

  // A create whose body is still arriving when the signal comes.
  const body = JSON.stringify({ name: 'in-flight' });
  const socket = connect(s.port, '127.0.0.1');
  let answer = '';
  socket.on('data', (d) => (answer += d.toString()));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  socket.write(`POST /v1/acme/repos HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
  await new Promise((r) => setTimeout(r, 200));

  const exited = new Promise<number | null>((resolve) => {
    s.process.once('exit', (code) => resolve(code));
    s.process.kill('SIGINT');
  });
  let health = '';
  for (let i = 0; i < 100 && health !== 'draining'; i++) {
    health = (await onKeptConnection('GET', '/healthz')).text;
    if (health !== 'draining') await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(health, 'draining', 'healthz says draining');
  const refused = await onKeptConnection('POST', '/v1/acme/repos', JSON.stringify({ name: 'too-late' }));
  t.equal(refused.status, 503);
  const envelope = JSON.parse(refused.text) as { error: { code: string; trace_id?: string } };
  t.equal(envelope.error.code, 'UNAVAILABLE');
  t.match(envelope.error.trace_id, /^[0-9a-f]{32}$/, '5xx carry a trace id');
  const logged = (): boolean => s.logs.some((l) => l.includes(envelope.error.trace_id!));
  for (let i = 0; i < 40 && !logged(); i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(logged(), 'which is in the server log');
  t.equal(refused.headers['retry-after'], '1');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer to the in-flight request: ${answer}`)), 10_000);
    socket.on('data', () => {
      if (answer.includes('\r\n\r\n{')) {
        clearTimeout(timer);
        resolve();
      }
    });
    socket.write(body.slice(5));
  });
  t.match(answer, /^HTTP\/1\.1 201/, 'the in-flight create finished');
  socket.destroy();
  await client.close().catch(() => undefined);
  t.equal(await exited, 0, 'exit code 0');
  t.notOk(s.logs.some((l) => l.includes('"level":"error"')), 'no error logged');

  await s.restart();
  t.equal((await s.api('GET', '/acme/in-flight')).status, 200, 'and it is on disk');
  t.equal((await s.api('GET', '/acme/too-late')).status, 404);
  t.equal(await s.stop(), 0);
});

t.test('shutdown - SIGTERM during a burst of creates: every acknowledged create is present after restart', async (t) => {
  const s = await startTestServer();
  t.teardown(() => s.cleanup());
  const token = await s.token();
  const acked: Array<{ id: string; name: string }> = [];
  const other: number[] = [];
  let seq = 0;
  const client = async (c: number): Promise<void> => {
    for (;;) {
      try {
        const res = await s.api('POST', '/acme/repos', { token, body: { name: `term-${c}-${seq++}` } });
        if (res.status === 201) acked.push({ id: res.json.id, name: res.json.name });
        else other.push(res.status);
      } catch {
        return; // the listener is closed: the server no longer accepts
      }
    }
  };
  const clients = Array.from({ length: 10 }, (_, c) => client(c));
  while (acked.length < 100) await new Promise((r) => setTimeout(r, 10));
  const code = await s.stop();
  await Promise.all(clients);
  t.equal(code, 0, 'exit code 0');
  t.ok(other.every((st) => st === 503), `requests on connections that outlived the listener were refused with 503 (${other.length})`);
  const onDisk = await checkRepositories(t, s.dataDir, 'acme');
  t.same(acked.filter((a) => !onDisk.has(a.id)), [], `all ${acked.length} acknowledged creates are on disk`);
  await s.restart();
  for (const a of acked.slice(-10)) t.equal((await s.api('GET', `/acme/${a.name}`)).json.id, a.id);
  t.equal(await s.stop(), 0);
});
