import t from 'tap';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { createRepo, startEnv, waitForLog, type Env } from './setup.js';

/**
 * A delivery's `last_error` (API §11.4) describes a failed attempt in our words: a receiver on
 * loopback answers with a distinctive string wherever an answer can carry text (reason phrase,
 * body, bytes that are not HTTP at all), and neither the delivery log nor the server's log may
 * contain it.
 */
const MARK = 'SENTINEL-41c9-receiver-said-this';

let e: Env;
let receiver: http.Server;
let garbage: net.Server;
t.before(async () => {
  e = await startEnv({ env: { REPOHOST_WEBHOOK_RETRY_BASE_MS: '60000' } });
  receiver = http.createServer((req, res) => {
    req.resume();
    res.writeHead(500, MARK, { 'content-type': 'text/plain', 'x-note': MARK }).end(`${MARK}\n`.repeat(100));
  });
  garbage = net.createServer((socket) => {
    socket.on('data', () => socket.end(`${MARK} this is not HTTP ${MARK}\r\n\r\n`));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve));
});
t.teardown(async () => {
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  await new Promise((r) => garbage.close(r));
  await e.close();
});

async function firstAttempt(name: string, port: number): Promise<any> {
  const repo = await createRepo(e, name);
  const target = await e.s.api('POST', '/acme/webhook-targets', { body: { url: `http://127.0.0.1:${port}/hook`, events: ['repo.updated'], repo_ids: [repo.id] } });
  if (target.status !== 201) throw new Error(`target: ${target.status} ${target.text}`);
  const patched = await e.s.api('PATCH', `/acme/${name}`, { body: { tags: { n: '1' } } });
  if (patched.status !== 200) throw new Error(`update: ${patched.status} ${patched.text}`);
  return (await waitForLog(e, target.json.id, (log) => log[0]?.attempts >= 1))[0];
}

t.test('webhook error text - a 500 with its own reason phrase and body is logged as the status alone', async (t) => {
  const d = await firstAttempt('status', (receiver.address() as AddressInfo).port);
  t.equal(d.last_status_code, 500);
  t.equal(d.last_error, 'the receiver answered HTTP 500');
});

t.test('webhook error text - an answer that is not HTTP is described, not quoted', async (t) => {
  const d = await firstAttempt('garbage', (garbage.address() as AddressInfo).port);
  t.equal(d.last_status_code, null);
  t.equal(d.last_error, "the receiver's answer is not valid HTTP");
});

t.test("webhook error text - the receiver's text is in no delivery record or log line", async (t) => {
  const targets = await e.s.api('GET', '/acme/webhook-targets');
  for (const target of targets.json.webhook_targets) {
    const log = await e.s.api('GET', `/acme/webhook-targets/${target.id}/deliveries`);
    t.notOk(log.text.includes(MARK), `not in the deliveries of ${target.id}`);
  }
  t.equal(targets.json.webhook_targets.length, 2, 'both targets were looked at');
  t.notOk(e.s.logs.join('\n').includes(MARK), 'not in the log');
});
