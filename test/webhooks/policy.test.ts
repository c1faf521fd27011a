import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { AttemptDeadlines } from '../../src/actors/system/webhooks/attempt-deadlines.js';
import { pruneDeliveryLog } from '../../src/actors/system/webhooks/log-pruning.js';
import { AddressRefusedError, createWebhookAgent } from '../../src/actors/system/webhooks/outbound-agent.js';
import { MAX_ATTEMPTS, classifyStatus, parseRetryAfter, retryDelayMs } from '../../src/actors/system/webhooks/retry-policy.js';
import { signatureHeader, signingKey } from '../../src/actors/system/webhooks/signature.js';
import { openStorage } from '../../src/storage/database.js';
import { newId } from '../../src/storage/ids.js';
import { K, lastPart, Ranges } from '../../src/storage/keys.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import type { WebhookTargetRecord } from '../../src/storage/webhook-store.js';
import { verifySignature } from '../helpers/webhook-receiver.js';
import { OwnedShards } from '../../src/actors/system/shard-ownership.js';
import { orgShard } from '../../src/storage/shards.js';

t.test('webhook policy - the address policy is applied at connection time, to the address dialled', async (t) => {
  const server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  const strict = createWebhookAgent(false, 1000);
  const open = createWebhookAgent(true, 1000);
  t.teardown(() => Promise.all([strict.destroy(), open.destroy()]));

  const refusal = async (agent: typeof strict, url: string): Promise<unknown> => {
    try {
      const res = await request(url, { method: 'POST', body: '{}', dispatcher: agent });
      await res.body.dump();
      return res.statusCode;
    } catch (err) {
      let e: unknown = err;
      while (e && !(e instanceof AddressRefusedError)) e = (e as { cause?: unknown }).cause;
      return e ?? err;
    }
  };
  // A name that resolves to loopback (as a rebound DNS name would) is judged by what it resolves to.
  for (const url of [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`]) {
    t.type(await refusal(strict, url), AddressRefusedError, `refused without private addresses: ${url}`);
    t.equal(await refusal(open, url), 200, `allowed with private addresses: ${url}`);
  }
  // The unspecified addresses are dialled as loopback: judged as loopback.
  for (const url of [`http://0.0.0.0:${port}/`, `http://[::]:${port}/`]) {
    t.type(await refusal(strict, url), AddressRefusedError, `refused without private addresses: ${url}`);
  }
  t.equal(await refusal(open, `http://0.0.0.0:${port}/`), 200, 'allowed as loopback with private addresses');
  const special = [
    'http://169.254.169.254/latest/meta-data',
    'http://[fe80::1]/',
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[::127.0.0.1]:${port}/`,
    `http://[64:ff9b::7f00:1]:${port}/`,
    `http://[2002:7f00:1::]:${port}/`,
    'http://[fec0::1]/',
    'http://198.18.0.1/',
    'http://240.0.0.1/',
    'http://255.255.255.255/',
    'http://192.0.0.8/',
  ];
  for (const url of special) t.type(await refusal(open, url), AddressRefusedError, `never allowed: ${url}`);
});

t.test('webhook policy - retry schedule, Retry-After and verdicts', async (t) => {
  t.equal(MAX_ATTEMPTS, 12);
  const mult = [1, 3, 12, 60, 180, 360, 720, 720, 720, 720, 720];
  mult.forEach((m, i) => {
    t.equal(retryDelayMs(i + 1, 1000, () => 0), 800 * m, `attempt ${i + 1}: −20 %`);
    t.equal(retryDelayMs(i + 1, 1000, () => 1), 1200 * m, `attempt ${i + 1}: +20 %`);
  });
  const now = Date.parse('2026-01-01T00:00:00Z');
  t.equal(parseRetryAfter('7', now), 7000);
  t.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now), 30000);
  t.equal(parseRetryAfter('soon', now), null);
  t.equal(parseRetryAfter(undefined, now), null);
  t.equal(parseRetryAfter('99999999', now), 24 * 3600 * 1000, 'capped at a day');
  t.same([200, 204, 408, 429, 500, 503, 301, 400, 401, 404, 410].map(classifyStatus), [
    'succeeded', 'succeeded', 'transient', 'transient', 'transient', 'transient', 'permanent', 'permanent', 'permanent', 'permanent', 'permanent',
  ]);
});

t.test('webhook policy - the signature is HMAC-SHA256 over "<t>.<body>" keyed with the whole whsec_ string', async (t) => {
  const secret = 'whsec_test-secret';
  const body = '{"id":"evt_1","type":"push"}';
  const now = Math.floor(Date.now() / 1000);
  const header = signatureHeader(secret, body, now);
  // Known answer, computed independently: printf '%s' "<t>.<body>" | openssl dgst -sha256 -hmac whsec_test-secret
  t.equal(signatureHeader(secret, body, 1700000000), 't=1700000000,sha256=cc736906fb801c0ba3d4b46c9059be64e4fc3c54fa78ff835c857e05f0c262b5');
  t.equal(signatureHeader(signingKey(secret), Buffer.from(body), 1700000000), signatureHeader(secret, body, 1700000000), 'a prepared key over the body bytes signs the same');
  t.ok(verifySignature(secret, header, body));
  t.notOk(verifySignature(secret, signatureHeader(secret, body, now - 600), body), 'older than 5 minutes is refused by the receiver');
});

t.test('webhook policy - the delivery log keeps finished deliveries for the retention period', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-prune-'));
  const storage = openStorage(dir);
  t.teardown(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const directory = new LmdbOrgDirectory(storage);
  directory.createOrg({ id: 'org_1', slug: 'o', name: 'o', created_at: '' });
  directory.putTarget({ id: 'wht_1', org_id: 'org_1', repo_ids: null } as WebhookTargetRecord);
  // Ids carry their creation time: 0000000000… is 1970, the others are made now.
  const old = (n: number, status: string): [string, string] => [`dlv_000000000${n}AAAAAAAAAAAAAAAA`, status];
  const rows: Array<[string, string]> = [old(1, 'succeeded'), old(2, 'failed'), old(3, 'pending'), [newId('dlv'), 'succeeded']];
  const shard = orgShard('org_1');
  for (const [id, status] of rows) storage.meta.putSync(K.webhookDelivery(shard, 'wht_1', id), { id, status });
  t.equal(await pruneDeliveryLog(storage, new OwnedShards(), Date.now() - 7 * 24 * 3600 * 1000), 2, 'the two old finished deliveries are removed');
  const left = [...storage.meta.getKeys(Ranges.webhookDeliveries(shard, 'wht_1'))].map(lastPart);
  t.same(left, [rows[2]![0], rows[3]![0]], 'an old pending delivery and a recent one stay');
});

t.test('webhook policy - an attempt ends at its timeout or at shutdown; spent shutdown controllers are let go', async (t) => {
  const short = new AttemptDeadlines(20);
  const timed = short.next();
  // The timeout's own timer does not hold the process open (nor should it the actor's thread).
  const open = setInterval(() => undefined, 1000);
  await new Promise((resolve) => timed.watch(() => resolve(undefined)));
  clearInterval(open);
  t.ok(timed.timedOut, 'its own timeout');
  let unwatched = false;
  timed.watch(() => (unwatched = true));
  t.ok(unwatched, 'watching a deadline that has passed calls back at once');
  const cut = short.next();
  let called = 0;
  cut.watch(() => called++);
  const stopWatching = cut.watch(() => called++);
  stopWatching();
  short.shutdown();
  t.ok(cut.signal.aborted, 'an attempt under way is cut at shutdown');
  t.equal(called, 1, 'each watcher still watching is called, once');
  t.notOk(cut.timedOut, 'which is not a timeout');
  t.ok(short.next().signal.aborted, 'an attempt after shutdown is cut at once');

  let monotonic = 0;
  const long = new AttemptDeadlines(1000, { epoch: 10, monotonicNow: () => monotonic });
  const first = long.next();
  monotonic += 49;
  t.equal(long.next(), first, 'attempts starting within 50 ms share a signal');
  monotonic += 1;
  t.not(long.next(), first, 'a later one has its own');
  // 1,000 signals over 60 s, a controller per 10 of them, against a 1 s timeout: only the
  // controllers of the last second or so stay.
  let most = 0;
  for (let i = 0; i < 1000; i++) {
    monotonic += 60;
    long.next();
    most = Math.max(most, long.held);
  }
  t.ok(most <= 4, `at most ${most} controllers held at a time, of 100 made`);
  long.shutdown();
});
