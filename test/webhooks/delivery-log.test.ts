import t from 'tap';
import { createRepo, createTarget, deliveries, startEnv, waitForLog, type Env } from './setup.js';

// A minute between attempts: a failing delivery stays pending, with one attempt, for the whole test.
let e: Env;
t.before(async () => {
  e = await startEnv({ env: { REPOHOST_WEBHOOK_RETRY_BASE_MS: '60000' } });
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

t.test('webhook delivery log - a pending delivery shows its attempts, code and next try', async (t) => {
  const down = await scoped('down');
  e.rx.behave(down.path, () => ({ status: 503 }));
  await down.trigger(1);
  const log = await waitForLog(e, down.id, (l) => l[0]?.attempts >= 1);
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

t.test('webhook delivery log - redeliver sends the same event again under a new delivery id', async (t) => {
  const once = await scoped('once');
  await once.trigger(1);
  const [original] = await waitForLog(e, once.id, (l) => l[0]?.status === 'succeeded');
  const res = await e.s.api('POST', `/acme/webhook-targets/${once.id}/deliveries/${original.id}/redeliver`);
  t.equal(res.status, 201);
  t.match(res.json.id, /^dlv_/);
  t.not(res.json.id, original.id);
  t.same(
    { redelivery_of: res.json.redelivery_of, event_id: res.json.event_id, status: res.json.status, attempts: res.json.attempts },
    { redelivery_of: original.id, event_id: original.event_id, status: 'pending', attempts: 0 },
  );
  await e.rx.waitFor(() => e.rx.received(once.path).some((d) => d.headers['x-svc-delivery'] === res.json.id), 3000, 'the redelivery');
  const again = e.rx.received(once.path).find((d) => d.headers['x-svc-delivery'] === res.json.id)!;
  t.ok(again.verified);
  t.equal(again.raw, e.rx.received(once.path)[0]!.raw, 'the same envelope');
  const log = await waitForLog(e, once.id, (l) => l.length === 2 && l[0].status === 'succeeded');
  t.same(log.map((d) => d.id), [res.json.id, original.id], 'newest first');
  t.equal(log[0].attempts, 1);
});

t.test('webhook delivery log - the log pages newest first', async (t) => {
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
