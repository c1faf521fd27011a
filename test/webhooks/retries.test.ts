import t, { type Test } from 'tap';
import { MAX_ATTEMPTS, RETRY_MULTIPLIERS } from '../../src/actors/system/webhooks/retry-policy.js';
import { PATH, RETRY_BASE_MS as BASE_MS, startActor, tag } from './actor.js';

/** The retry schedule of API §11.3, on the actor's clock moved by hand (see actor.ts). */

/** Asserts that `gapMs` lies within the ±20 % jitter of `multiplier` × base. */
function inSchedule(t: Test, gapMs: number, multiplier: number, what: string): void {
  const low = Math.round(BASE_MS * multiplier * 0.8);
  const high = Math.round(BASE_MS * multiplier * 1.2);
  t.ok(gapMs >= low && gapMs <= high, `${what}: ${gapMs} ms within ${low}–${high} ms`);
}

t.test('webhook retries - 500 twice then 200: three attempts, one delivery id, base × 1 then × 3 apart', async (t) => {
  const a = await startActor(t, { behave: (_req, nth) => (nth <= 2 ? { status: 500 } : { status: 200 }) });
  a.emit(['repo_1', 1]);
  const first = await a.settled('repo_1', 1, 1);
  t.same([first.status, first.last_status_code, first.last_error], ['pending', 500, 'the receiver answered HTTP 500']);
  a.retry(first);
  const second = await a.settled('repo_1', 1, 2);
  a.retry(second);
  const done = await a.settled('repo_1', 1, 3);

  const got = a.rx.received(PATH);
  t.same(got.map((d) => d.answered), [500, 500, 200]);
  inSchedule(t, got[1]!.at - got[0]!.at, 1, 'first retry');
  inSchedule(t, got[2]!.at - got[1]!.at, 3, 'second retry');
  t.equal(new Set(got.map((d) => d.headers['x-svc-delivery'])).size, 1, 'the same X-Svc-Delivery every time');
  t.equal(got[0]!.headers['x-svc-delivery'], done.id);
  t.ok(got.every((d) => d.verified), 'each attempt signed');
  t.same(got.map((d) => Number(/t=(\d+)/.exec(d.headers['x-svc-signature'] as string)![1])), got.map((d) => Math.floor(d.at / 1000)), 'each signed at its own sending time');
  t.equal(new Set(got.map((d) => d.raw)).size, 1, 'the same body every time');
  t.same(
    { status: done.status, attempts: done.attempts, last_status_code: done.last_status_code, last_error: done.last_error, next_attempt_at: done.next_attempt_at },
    { status: 'succeeded', attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null },
  );
  t.notOk(a.queued(), 'nothing left to send');
});

t.test('webhook retries - a receiver that keeps failing gets the whole schedule, 12 attempts, then the delivery fails', async (t) => {
  const a = await startActor(t, { behave: () => ({ status: 503 }) });
  a.emit(['repo_1', 1]);
  let d = await a.settled('repo_1', 1, 1);
  for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
    t.equal(d.status, 'pending', `pending after attempt ${attempt}`);
    a.retry(d);
    d = await a.settled('repo_1', 1, attempt + 1);
  }
  const got = a.rx.received(PATH);
  t.equal(got.length, MAX_ATTEMPTS);
  RETRY_MULTIPLIERS.forEach((m, i) => inSchedule(t, got[i + 1]!.at - got[i]!.at, m, `retry ${i + 1}`));
  const hours = (got.at(-1)!.at - got[0]!.at) / 3600_000;
  t.ok(hours > 9 && hours < 14.1, `about 12 hours from the first attempt to the last (${hours.toFixed(1)} h)`);
  t.ok(got.every((x) => x.verified), 'each attempt signed with a fresh timestamp');
  t.same(
    { status: d.status, attempts: d.attempts, last_status_code: d.last_status_code, next_attempt_at: d.next_attempt_at },
    { status: 'failed', attempts: 12, last_status_code: 503, next_attempt_at: null },
  );
  t.notOk(a.queued(), 'a failed delivery is never tried again');
});

t.test('webhook retries - a 410 fails at once, without retries', async (t) => {
  const a = await startActor(t, { behave: () => ({ status: 410 }) });
  a.emit(['repo_1', 1]);
  const d = await a.settled('repo_1', 1, 1);
  t.same([d.status, d.attempts, d.last_status_code, d.next_attempt_at], ['failed', 1, 410, null]);
  t.notOk(a.queued());
});

t.test('webhook retries - a Retry-After longer than the backoff is honoured, a shorter one is not', async (t) => {
  const a = await startActor(t, {
    behave: (_req, nth) => {
      if (nth === 1) return { status: 429, headers: { 'retry-after': '120' } };
      if (nth === 2) return { status: 503, headers: { 'retry-after': '1' } };
      return { status: 200 };
    },
  });
  a.emit(['repo_1', 1]);
  const first = await a.settled('repo_1', 1, 1);
  a.retry(first);
  const second = await a.settled('repo_1', 1, 2);
  a.retry(second);
  const done = await a.settled('repo_1', 1, 3);
  const got = a.rx.received(PATH);
  t.equal(got[1]!.at - got[0]!.at, 120_000, 'Retry-After: 120 rather than base × 1');
  inSchedule(t, got[2]!.at - got[1]!.at, 3, 'Retry-After: 1 is shorter than base × 3, which stands');
  t.equal(done.status, 'succeeded');
});

t.test('webhook retries - an address refused when connecting fails at once', async (t) => {
  // The target was saved with a loopback URL this server does not allow (as a name that later
  // resolves there would be): the connection is refused, for good, and nothing is sent.
  const a = await startActor(t, { allowPrivate: false });
  a.emit(['repo_1', 1]);
  const d = await a.settled('repo_1', 1, 1);
  t.same([d.status, d.attempts, d.last_status_code], ['failed', 1, null]);
  t.match(d.last_error, /^address refused: 127\.0\.0\.1 is a private or loopback address/);
  t.equal(a.rx.received(PATH).length, 0);
});

t.test('webhook retries - no answer within the timeout is a transient failure', async (t) => {
  const a = await startActor(t, { timeoutMs: 100, behave: (_req, nth) => (nth === 1 ? 'hang' : { status: 200 }) });
  a.emit(['repo_1', 1]);
  const first = await a.settled('repo_1', 1, 1);
  t.same([first.status, first.last_status_code, first.last_error], ['pending', null, 'no answer within 0.1 s']);
  a.retry(first);
  t.equal((await a.settled('repo_1', 1, 2)).status, 'succeeded');
});

t.test('webhook retries - one repository waits behind its failing head, another does not; a delivery failed for good is skipped', async (t) => {
  let failures = 0;
  const a = await startActor(t, {
    behave: (req) => {
      if (tag(req) === 'one:1' && failures++ === 0) return { status: 500 };
      return tag(req) === 'one:2' ? { status: 400 } : { status: 200 };
    },
  });
  a.emit(['one', 1], ['one', 2], ['one', 3], ['two', 1]);
  const waiting = await a.settled('one', 1, 1);
  await a.settled('two', 1, 1);
  t.same(a.rx.received(PATH).map(tag).sort(), ['one:1', 'two:1'], 'two went ahead while one waits for its retry; nothing of one overtook its head');
  a.retry(waiting);
  await a.settled('one', 3, 1);
  const order = a.rx.received(PATH).map((d) => `${tag(d)}=${d.answered}`);
  t.same(order.filter((x) => x.startsWith('one:')), ['one:1=500', 'one:1=200', 'one:2=400', 'one:3=200'], 'one in event order, each after its predecessor is done');
  t.same(a.deliveries().map((d) => `${JSON.parse(d.body).repository.id}:${JSON.parse(d.body).data.n}=${d.status}`), ['one:1=succeeded', 'one:2=failed', 'one:3=succeeded', 'two:1=succeeded']);
});

t.test('webhook retries - stopping cuts an attempt short and leaves it pending; the next start sends it under the same id', async (t) => {
  // The timeout is far beyond the test's own: only the shutdown can end the hanging attempt.
  const a = await startActor(t, { timeoutMs: 3600_000, behave: (_req, nth) => (nth === 1 ? 'hang' : { status: 200 }) });
  a.emit(['repo_1', 1]);
  await a.rx.waitFor(() => a.rx.received(PATH).length === 1, 5000, 'the first attempt');
  await a.restart();
  const [stopped] = a.deliveries();
  t.same([stopped!.status, stopped!.attempts], ['pending', 0], 'the cut attempt is not counted');
  const done = await a.settled('repo_1', 1, 1);
  const got = a.rx.received(PATH);
  t.equal(got.length, 2);
  t.equal(got[1]!.headers['x-svc-delivery'], got[0]!.headers['x-svc-delivery'], 'sent again under the same delivery id');
  t.same([done.status, done.attempts], ['succeeded', 1]);
});
