import t from 'tap';
import { verifySignature } from '../helpers/webhook-receiver.js';
import { createRepo, createTarget, startEnv, waitForLog, type Env } from './setup.js';

// base 1 ms: the whole schedule (1 + 3 + 12 + 60 + 180 + 360 + 5 × 720 ms, ±20 %) takes ≈ 4 s.
let e: Env;
t.before(async () => {
  e = await startEnv({ brand: 'Mesa', env: { REPOHOST_WEBHOOK_RETRY_BASE_MS: '1' } });
});
t.teardown(() => e.close());

t.test('webhook brand - REPOHOST_BRAND=Mesa names the headers and the user agent', async (t) => {
  const target = await createTarget(e, { events: ['repo.created'] });
  await createRepo(e, 'branded');
  await e.rx.waitFor(() => e.rx.received(target.path).length > 0, 5000, 'the delivery');
  const d = e.rx.received(target.path)[0]!;
  t.ok(d.verified, 'verifies from X-Mesa-Signature');
  t.equal(d.headers['user-agent'], 'Mesa-Webhook/1.0');
  t.equal(d.headers['x-mesa-event'], 'repo.created');
  t.match(d.headers['x-mesa-delivery'], /^dlv_/);
  t.ok(verifySignature(target.secret, d.headers['x-mesa-signature'] as string, d.raw));
  t.notOk(Object.keys(d.headers).some((h) => h.startsWith('x-svc-')), 'no Svc headers');
});

t.test('webhook brand - a delivery that keeps failing is failed after the 12th attempt', async (t) => {
  const target = await createTarget(e, { events: ['repo.created'] });
  e.rx.behave(target.path, () => ({ status: 502 }));
  await createRepo(e, 'never');
  const pending = await waitForLog(e, target.id, (l) => l[0]?.attempts >= 1);
  t.equal(pending[0].status, 'pending');
  const metrics = await (await fetch(e.s.metricsUrl!)).text();
  const backlog = /^repohost_webhook_backlog (\d+)/m.exec(metrics);
  t.ok(backlog && Number(backlog[1]) >= 1, `backlog gauge counts the pending delivery (${backlog?.[0]})`);

  const log = await waitForLog(e, target.id, (l) => l[0]?.status === 'failed', 15000);
  t.same([log[0].attempts, log[0].last_status_code, log[0].next_attempt_at], [12, 502, null]);
  t.equal(e.rx.received(target.path).length, 12);
  const gaps = e.rx.received(target.path).slice(1).map((d, i) => d.at - e.rx.received(target.path)[i]!.at);
  t.ok(gaps[10]! >= 720 * 0.8 - 5 && gaps[5]! >= 360 * 0.8 - 5, `the schedule stretches to base × 720 (${gaps.join(', ')} ms)`);
  const after = await (await fetch(e.s.metricsUrl!)).text();
  t.match(after, /^repohost_webhook_backlog 0$/m, 'nothing pending any more');
});
