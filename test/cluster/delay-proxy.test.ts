import t from 'tap';
import { connect, createServer, type Socket } from 'node:net';
import { once } from 'node:events';
import { startDelayProxy } from '../helpers/delay-proxy.js';

/** The latency injector the cluster tests put between a node and an engine. */

const echo = createServer((s) => s.pipe(s));
echo.listen(0, '127.0.0.1');
await once(echo, 'listening');
t.teardown(() => new Promise<void>((resolve) => echo.close(() => resolve())));
const echoPort = (echo.address() as { port: number }).port;

async function dial(port: number): Promise<Socket> {
  const s = connect(port, '127.0.0.1');
  await once(s, 'connect');
  return s;
}

/** Sends `text` and waits until it all came back; returns the milliseconds taken. */
async function roundTrip(s: Socket, text: string): Promise<{ ms: number; got: string }> {
  const started = performance.now();
  let got = '';
  await new Promise<void>((resolve) => {
    const onData = (d: Buffer): void => {
      got += d.toString();
      if (got.length >= text.length) {
        s.off('data', onData);
        resolve();
      }
    };
    s.on('data', onData);
    s.write(text);
  });
  return { ms: performance.now() - started, got };
}

t.test('adds the delay each way, and can change it on open connections', async (t) => {
  const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: echoPort, delayMs: 100 });
  t.teardown(() => proxy.stop());
  const s = await dial(proxy.port);
  t.teardown(() => s.destroy());
  const slow = await roundTrip(s, 'ping');
  t.equal(slow.got, 'ping');
  t.ok(slow.ms >= 195, `round trip ${slow.ms.toFixed(0)} ms through 100 ms each way`);
  proxy.setDelay(0);
  const fast = await roundTrip(s, 'pong');
  t.equal(fast.got, 'pong');
  t.ok(fast.ms < 100, `round trip ${fast.ms.toFixed(0)} ms once the delay is off`);
});

t.test('jitter never reorders bytes', async (t) => {
  const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: echoPort, delayMs: 5, jitterMs: 30 });
  t.teardown(() => proxy.stop());
  const s = await dial(proxy.port);
  t.teardown(() => s.destroy());
  let sent = '';
  let got = '';
  s.on('data', (d: Buffer) => (got += d.toString()));
  for (let i = 0; i < 200; i++) {
    const piece = `${i},`;
    sent += piece;
    s.write(piece);
    await new Promise((r) => setImmediate(r));
  }
  const deadline = Date.now() + 5000;
  while (got.length < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(got, sent, '200 chunks arrive in order');
});

t.test('stop closes every proxied connection and the listener', async (t) => {
  const proxy = await startDelayProxy({ targetHost: '127.0.0.1', targetPort: echoPort });
  const s = await dial(proxy.port);
  await roundTrip(s, 'x');
  const closed = once(s, 'close');
  await proxy.stop();
  await closed;
  t.pass('the client saw its connection close');
  const refused = connect(proxy.port, '127.0.0.1');
  const [err] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
  t.equal(err.code, 'ECONNREFUSED', 'the listener is gone');
});
