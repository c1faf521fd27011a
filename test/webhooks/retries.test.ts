import t from 'tap';
import { createRepo, createTarget, deliveries, startEnv, waitForLog, sleep, type Env } from './setup.js';

// Retries wait base × 1, 3, 12, … (±20 %): 200 ms gives gaps of 160–240 ms, then 480–720 ms.
const BASE_MS = 200;
let e: Env;
t.before(async () => {
  e = await startEnv({ env: { REPOHOST_WEBHOOK_RETRY_BASE_MS: String(BASE_MS) } });
});
t.teardown(() => e.close());

/** A repository and a target that hears only its updates, so that other tests' events stay away. */
async function scoped(name: string): Promise<{ id: string; path: string; trigger(n: number): Promise<void> }> {
  const repo = await createRepo(e, name);
  const target = await createTarget(e, { events: ['repo.updated'], repo_ids: [repo.id] });
  return {
    ...target,
    async trigger(n) {
      const res = await e.s.api('PATCH', `/acme/${name}`, { body: { tags: { n: String(n) } } });
      if (res.status !== 200) throw new Error(`update ${name}: ${res.status} ${res.text}`);
    },
  };
}

let flaky: { id: string; path: string };
let flakyDelivery: any;

t.test('webhook retries - 500 twice then 200: three attempts, one delivery id, growing gaps', async (t) => {
  const target = await scoped('flaky');
  flaky = target;
  e.rx.behave(flaky.path, (_req, nth) => (nth <= 2 ? { status: 500 } : { status: 200 }));
  await target.trigger(1);
  await e.rx.waitFor(() => e.rx.received(flaky.path).length >= 3, 5000, 'three attempts');
  await sleep(3 * BASE_MS * 12);
  const got = e.rx.received(flaky.path);
  t.equal(got.length, 3, 'no attempt after the success');
  t.same(got.map((d) => d.answered), [500, 500, 200]);
  t.equal(new Set(got.map((d) => d.headers['x-svc-delivery'])).size, 1, 'the same X-Svc-Delivery every time');
  t.ok(got.every((d) => d.verified), 'each attempt freshly signed');
  t.equal(new Set(got.map((d) => d.raw)).size, 1, 'the same body every time');
  const gap1 = got[1]!.at - got[0]!.at;
  const gap2 = got[2]!.at - got[1]!.at;
  t.ok(gap1 >= BASE_MS * 0.8 - 5, `first retry after ≈ base (${gap1} ms)`);
  t.ok(gap2 >= BASE_MS * 3 * 0.8 - 5, `second retry after ≈ 3 × base (${gap2} ms)`);
  t.ok(gap2 > gap1, `the gaps grow (${gap1} ms, then ${gap2} ms)`);

  const log = await waitForLog(e, flaky.id, (l) => l[0]?.status === 'succeeded');
  t.equal(log.length, 1);
  flakyDelivery = log[0];
  t.same(
    { status: flakyDelivery.status, attempts: flakyDelivery.attempts, last_status_code: flakyDelivery.last_status_code, last_error: flakyDelivery.last_error, next_attempt_at: flakyDelivery.next_attempt_at, redelivery_of: flakyDelivery.redelivery_of, event_type: flakyDelivery.event_type },
    { status: 'succeeded', attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null, redelivery_of: null, event_type: 'repo.updated' },
  );
  t.equal(flakyDelivery.id, got[0]!.headers['x-svc-delivery']);
  t.equal(flakyDelivery.event_id, got[0]!.body.id);
});

t.test('webhook retries - the log shows a pending delivery with its attempts, code and next try', async (t) => {
  const down = await scoped('down');
  e.rx.behave(down.path, () => ({ status: 503 }));
  await down.trigger(1);
  const log = await waitForLog(e, down.id, (l) => l[0]?.attempts >= 2);
  const d = log[0];
  t.equal(d.status, 'pending');
  t.equal(d.last_status_code, 503);
  t.match(d.last_error, /503/);
  t.ok(Date.parse(d.next_attempt_at) > Date.parse(d.created_at), 'next attempt scheduled');

  const pending = await e.s.api('POST', `/acme/webhook-targets/${down.id}/deliveries/${d.id}/redeliver`);
  t.equal(pending.status, 409, 'no redelivery while the original is pending');
  t.equal(pending.json.error.code, 'ABORTED');
  t.equal((await e.s.api('DELETE', `/acme/webhook-targets/${down.id}`)).status, 200, 'deleting the target drops its queue');
});

t.test('webhook retries - a 410 fails at once, without retries', async (t) => {
  const gone = await scoped('gone');
  e.rx.behave(gone.path, () => ({ status: 410 }));
  await gone.trigger(1);
  const log = await waitForLog(e, gone.id, (l) => l[0]?.status === 'failed');
  t.same([log[0].attempts, log[0].last_status_code, log[0].next_attempt_at], [1, 410, null]);
  await sleep(BASE_MS * 5);
  t.equal(e.rx.received(gone.path).length, 1, 'tried once');
});

t.test('webhook retries - a longer Retry-After is honoured', async (t) => {
  const busy = await scoped('busy');
  e.rx.behave(busy.path, (_req, nth) => (nth === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
  await busy.trigger(1);
  await e.rx.waitFor(() => e.rx.received(busy.path).length >= 2, 5000, 'the retry');
  const [first, second] = e.rx.received(busy.path);
  const gap = second!.at - first!.at;
  t.ok(gap >= 950, `waited for Retry-After: 1 s rather than base ${BASE_MS} ms (${gap} ms)`);
  t.equal(second!.answered, 200);
});

t.test('webhook retries - redeliver sends the same event again under a new delivery id', async (t) => {
  const res = await e.s.api('POST', `/acme/webhook-targets/${flaky.id}/deliveries/${flakyDelivery.id}/redeliver`);
  t.equal(res.status, 201);
  t.match(res.json.id, /^dlv_/);
  t.not(res.json.id, flakyDelivery.id);
  t.same(
    { redelivery_of: res.json.redelivery_of, event_id: res.json.event_id, status: res.json.status, attempts: res.json.attempts },
    { redelivery_of: flakyDelivery.id, event_id: flakyDelivery.event_id, status: 'pending', attempts: 0 },
  );
  await e.rx.waitFor(() => e.rx.received(flaky.path).some((d) => d.headers['x-svc-delivery'] === res.json.id), 3000, 'the redelivery');
  const again = e.rx.received(flaky.path).find((d) => d.headers['x-svc-delivery'] === res.json.id)!;
  t.ok(again.verified);
  t.equal(again.raw, e.rx.received(flaky.path)[0]!.raw, 'the same envelope');
  const log = await waitForLog(e, flaky.id, (l) => l.length === 2 && l[0].status === 'succeeded');
  t.same(log.map((d) => d.id), [res.json.id, flakyDelivery.id], 'newest first');
  t.equal(log[0].attempts, 1);
});

t.test('webhook retries - the delivery log pages newest first', async (t) => {
  const many = await scoped('paged');
  for (let i = 0; i < 6; i++) await many.trigger(i);
  const all = await waitForLog(e, many.id, (l) => l.length === 6 && l.every((d) => d.status === 'succeeded'));
  const paged: string[] = [];
  let cursor: string | null = null;
  do {
    const res: any = await e.s.api('GET', `/acme/webhook-targets/${many.id}/deliveries?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    paged.push(...res.json.deliveries.map((d: any) => d.id));
    cursor = res.json.next_cursor;
  } while (cursor);
  t.same(paged, all.map((d) => d.id));
  t.same([...paged].sort().reverse(), paged, 'ids descend');
  t.same(Object.keys(all[0]).sort(), ['attempts', 'created_at', 'event_id', 'event_type', 'id', 'last_error', 'last_status_code', 'next_attempt_at', 'redelivery_of', 'status']);
  t.equal((await e.s.api('GET', `/acme/webhook-targets/${many.id}/deliveries?limit=101`)).status, 400);
  t.same(await deliveries(e, many.id, '?limit=1'), [all[0]]);
});

t.test('webhook retries - one repository waits behind its failing head, another does not; a delivery failed for good is skipped', async (t) => {
  const one = await createRepo(e, 'hol-one');
  const two = await createRepo(e, 'hol-two');
  const target = await createTarget(e, { events: ['repo.updated'], repo_ids: [one.id, two.id] });
  const tag = (d: { body: any }): string => `${d.body.repository.name}:${d.body.data.after.tags.n}`;
  // hol-one:1 fails (transient) until hol-two:1 has arrived: were hol-two queued behind hol-one,
  // neither would ever get through. hol-one:2 is refused for good (400); the rest is taken.
  const twoArrived = (): boolean => e.rx.received(target.path).some((d) => tag(d) === 'hol-two:1');
  e.rx.behave(target.path, (req) => {
    if (tag(req) === 'hol-one:1' && !twoArrived()) return { status: 500 };
    return tag(req) === 'hol-one:2' ? { status: 400 } : { status: 200 };
  });
  for (const n of [1, 2, 3]) await e.s.api('PATCH', '/acme/hol-one', { body: { tags: { n: String(n) } } });
  await e.rx.waitFor(() => e.rx.received(target.path).length > 0, 5000, 'the first attempt of hol-one:1');
  await e.s.api('PATCH', '/acme/hol-two', { body: { tags: { n: '1' } } });
  await e.rx.waitFor(() => e.rx.received(target.path).some((d) => tag(d) === 'hol-one:3'), 5000, 'hol-one:3');
  const order = e.rx.received(target.path).map((d) => `${tag(d)}=${d.answered}`);
  const oneAfterRetry = order.filter((x) => x.startsWith('hol-one') && x !== 'hol-one:1=500');
  t.ok(order[0] === 'hol-one:1=500', 'hol-one:1 failed first');
  t.same(oneAfterRetry, ['hol-one:1=200', 'hol-one:2=400', 'hol-one:3=200'], 'hol-one in event order, each after its predecessor is done');
  t.ok(order.indexOf('hol-two:1=200') < order.indexOf('hol-one:1=200'), `hol-two went ahead while hol-one retried (${order.join(', ')})`);
  t.notOk(order.slice(0, order.indexOf('hol-one:1=200')).some((x) => /hol-one:[23]/.test(x)), 'nothing of hol-one overtook its failing head');
  const log = await waitForLog(e, target.id, (l) => l.length === 4 && l.every((d) => d.status !== 'pending'));
  t.same(log.map((d) => d.status).sort(), ['failed', 'succeeded', 'succeeded', 'succeeded']);
});
