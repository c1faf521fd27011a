/**
 * `node dist/bench/forward-transport.js [--requests 4000]`: the client for forwarded actor
 * messages, node:http2 against undici's h2c client, on one cleartext HTTP/2 connection to a
 * node:http2 server that echoes the body (a 300-byte message, about an ActorRequest's size).
 * Sequentially and with 16 in flight; prints p50 and p99 in ms and requests per second.
 */
import { connect, createServer } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { H2CClient } from 'undici';

const { values } = parseArgs({ options: { requests: { type: 'string' } } });
const REQUESTS = Number(values.requests ?? 4000);
const MESSAGE = Buffer.alloc(300, 7);

const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (d: Buffer) => parts.push(d));
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.concat(parts)));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

const session = connect(url);
const viaNode = (): Promise<void> =>
  new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'POST', ':path': '/actor', 'content-type': 'application/x-protobuf' });
    stream.on('data', () => undefined);
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.end(MESSAGE);
  });
const h2c = new H2CClient(url);
const viaUndici = async (): Promise<void> => {
  const res = await h2c.request({ path: '/actor', method: 'POST', body: MESSAGE, headers: { 'content-type': 'application/x-protobuf' } });
  await res.body.arrayBuffer();
};

const quantile = (xs: number[], q: number): number => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

async function run(name: string, one: () => Promise<void>, inFlight: number): Promise<void> {
  for (let i = 0; i < 300; i++) await one();
  const ms: number[] = [];
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (sent++ < REQUESTS) {
        const t0 = performance.now();
        await one();
        ms.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  ms.sort((a, b) => a - b);
  console.log(`${name.padEnd(18)} in flight ${String(inFlight).padStart(2)}  p50 ${quantile(ms, 0.5).toFixed(3)} ms  p99 ${quantile(ms, 0.99).toFixed(3)} ms  ${Math.round(REQUESTS / seconds)}/s`);
}

for (const inFlight of [1, 16]) {
  await run('node:http2', viaNode, inFlight);
  await run('undici H2CClient', viaUndici, inFlight);
}
session.close();
await h2c.close();
server.close();
