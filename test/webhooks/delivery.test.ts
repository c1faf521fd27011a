import t, { type Test } from 'tap';
import { startEventLog, verifySignature, type ReceivedDelivery } from '../helpers/webhook-receiver.js';
import { createRepo, createTarget, deliveries, startEnv, waitForLog, type CreatedTarget, type Env } from './setup.js';

const PUBLIC_URL = 'https://repohost.test';
const ROOT = 'z'.repeat(32);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

let e: Env;
let all: CreatedTarget;
let org: { id: string; slug: string; name: string };
t.before(async () => {
  e = await startEnv({ env: { REPOHOST_PUBLIC_URL: PUBLIC_URL } });
  const o = (await e.s.api('GET', '/acme')).json;
  org = { id: o.id, slug: o.slug, name: o.name };
});
t.teardown(() => e.close());

/** The delivery of `type` about repository `name` on `path`, once it has arrived. */
async function arrival(path: string, type: string, name: string): Promise<ReceivedDelivery> {
  const find = (): ReceivedDelivery | undefined => e.rx.received(path).find((d) => d.body?.type === type && d.body?.repository?.name === name);
  await e.rx.waitFor(() => find() !== undefined, 5000, `${type} for ${name} on ${path}`);
  return find()!;
}

const repoEvent = (r: any): Record<string, unknown> => ({ id: r.id, name: r.name, default_bookmark: r.default_bookmark, head_change_id: r.head_change_id, created_at: r.created_at, tags: r.tags });

/**
 * Every event kind the server produces today: the operation that emits it and what its `data`
 * must be. A new kind is one more row.
 */
type Check = (t: Test, data: any) => void;
const KINDS: Array<[type: string, act: (name: string) => Promise<Check>]> = [
  ['repo.created', async (name) => { const r = await createRepo(e, name, { tags: { team: 'a' } }); return (t, data) => t.same(data, { repo: repoEvent(r) }); }],
  ['bookmark.created', async (name) => { await createRepo(e, name); return (t, data) => t.same(data, { bookmark: { name: 'main', is_default: true, change_id: ROOT, commit_oid: '0'.repeat(40) } }); }],
  ['repo.updated', async (name) => { await createRepo(e, name, { tags: { team: 'a' } }); const r = (await e.s.api('PATCH', `/acme/${name}`, { body: { tags: { team: 'b', tier: '1' } } })).json; return (t, data) => t.same(data, { repo: repoEvent(r), before: { name, default_bookmark: 'main', tags: { team: 'a' } }, after: { name, default_bookmark: 'main', tags: { team: 'b', tier: '1' } } }); }],
  ['repo.deleted', async (name) => { const r = await createRepo(e, name); await e.s.api('DELETE', `/acme/${name}`); return (t, data) => t.same(data, { repo: repoEvent(r) }); }],
];

t.test('webhook delivery - every event kind arrives signed, with exact headers, envelope and payload', async (t) => {
  all = await createTarget(e, { name: 'all', events: KINDS.map(([type]) => type) });
  for (const [type, act] of KINDS) {
    const name = `kind-${type.replace('.', '-')}`;
    const check = await act(name);
    const d = await arrival(all.path, type, name);
    t.ok(d.verified, `${type}: signature verifies with the target secret`);
    t.equal(d.answered, 200);
    t.equal(d.headers['content-type'], 'application/json');
    t.equal(d.headers['user-agent'], 'Svc-Webhook/1.0');
    t.equal(d.headers['x-svc-event'], type);
    t.match(d.headers['x-svc-delivery'], /^dlv_/);
    t.match(d.headers['x-svc-signature'], /^t=\d+,sha256=[0-9a-f]{64}$/);
    const body = d.body;
    t.same(Object.keys(body), ['id', 'type', 'occurred_at', 'organization', 'repository', 'data'], `${type}: envelope fields in order`);
    t.match(body.id, /^evt_/);
    t.equal(body.type, type);
    t.match(body.occurred_at, ISO);
    t.same(body.organization, org);
    t.same(body.repository, { id: body.repository.id, name, url: `${PUBLIC_URL}/v1/acme/${name}` });
    check(t, body.data);
  }
});

t.test('webhook delivery - the receiver refuses tampered bodies and foreign secrets', async (t) => {
  const d = e.rx.received(all.path).find((x) => x.verified)!;
  const header = d.headers['x-svc-signature'] as string;
  t.ok(verifySignature(all.secret, header, d.raw), 'the original verifies');
  t.notOk(verifySignature(all.secret, header, d.raw.replace('"acme"', '"evil"')), 'a changed body does not');
  t.notOk(verifySignature(all.secret, header, `${d.raw} `), 'one added byte does not');
  t.notOk(verifySignature(`${all.secret}x`, header, d.raw), 'another secret does not');
  const ts = Number(/t=(\d+)/.exec(header)![1]);
  t.ok(Math.abs(ts - d.at / 1000) < 5, 't is the unix time of sending');
  const replay = await fetch(e.rx.url(all.path), { method: 'POST', headers: { 'content-type': 'application/json', 'x-svc-signature': header }, body: d.raw.replace('"acme"', '"evil"') });
  t.equal(replay.status, 401, 'the receiver answers 401 to a tampered delivery');
});

t.test('webhook delivery - after rotate-secret only the new secret verifies', async (t) => {
  const target = await createTarget(e, { events: ['repo.created'] });
  await createRepo(e, 'rot-before');
  t.ok((await arrival(target.path, 'repo.created', 'rot-before')).verified);
  const rotated = await e.s.api('POST', `/acme/webhook-targets/${target.id}/rotate-secret`, { body: {} });
  t.equal(rotated.status, 200);
  const fresh = rotated.json.secret as string;
  e.rx.setSecret(target.path, fresh);
  await createRepo(e, 'rot-after');
  const d = await arrival(target.path, 'repo.created', 'rot-after');
  const header = d.headers['x-svc-signature'] as string;
  t.ok(verifySignature(fresh, header, d.raw), 'signed with the new secret');
  t.notOk(verifySignature(target.secret, header, d.raw), 'the old secret no longer verifies');
  t.notOk(/,/.test(header.replace(/^t=\d+,/, '')), 'a single signature, no second one with the old secret');
});

t.test('webhook delivery - targets get the kinds they subscribe to, org-wide or for their repositories', async (t) => {
  const r1 = await createRepo(e, 'filter-one');
  const r2 = await createRepo(e, 'filter-two');
  const orgWide = await createTarget(e, { events: ['repo.updated'] });
  const scoped = await createTarget(e, { events: ['repo.updated'], repo_ids: [r1.id] });
  const createdOnly = await createTarget(e, { events: ['repo.created'] });

  await e.s.api('PATCH', '/acme/filter-one', { body: { tags: { n: '1' } } });
  await e.s.api('PATCH', '/acme/filter-two', { body: { tags: { n: '2' } } });
  await arrival(orgWide.path, 'repo.updated', 'filter-two');
  await arrival(orgWide.path, 'repo.updated', 'filter-one');
  await arrival(scoped.path, 'repo.updated', 'filter-one');
  // Both updates have been fanned out (the org-wide target got them): the logs are complete.
  t.same((await deliveries(e, scoped.id)).map((d) => d.event_type), ['repo.updated'], 'the scoped target got only its repository');
  t.same(await deliveries(e, createdOnly.id), [], 'no delivery of a kind not subscribed');
  t.notOk(e.rx.received(scoped.path).some((d) => d.body.repository.id === r2.id));

  const widened = await e.s.api('PATCH', `/acme/webhook-targets/${scoped.id}`, { body: { repo_ids: null } });
  t.equal(widened.json.repo_ids, null);
  await e.s.api('PATCH', '/acme/filter-two', { body: { tags: { n: '3' } } });
  const d = await arrival(scoped.path, 'repo.updated', 'filter-two');
  t.equal(d.body.data.after.tags.n, '3', 'org-wide after PATCH repo_ids: null');
});

t.test('webhook delivery - a deleted repository stays in repo_ids, matching nothing after its last events', async (t) => {
  const gone = await createRepo(e, 'leaving');
  const stays = await createRepo(e, 'staying');
  const target = await createTarget(e, { events: ['repo.updated', 'repo.deleted'], repo_ids: [gone.id, stays.id] });
  await e.s.api('PATCH', '/acme/leaving', { body: { tags: { last: 'yes' } } });
  t.equal((await e.s.api('DELETE', '/acme/leaving')).status, 200);
  t.same((await e.s.api('GET', `/acme/webhook-targets/${target.id}`)).json.repo_ids, [gone.id, stays.id], 'the deleted repository keeps its place in repo_ids');
  await arrival(target.path, 'repo.updated', 'leaving');
  const deleted = await arrival(target.path, 'repo.deleted', 'leaving');
  t.equal(deleted.body.repository.id, gone.id, 'the target still heard of the deletion it subscribed to');
  // A new repository with the old name is another repository: not in repo_ids.
  await createRepo(e, 'leaving');
  await e.s.api('PATCH', '/acme/leaving', { body: { tags: { again: '1' } } });
  await e.s.api('PATCH', '/acme/staying', { body: { tags: { still: '1' } } });
  await arrival(target.path, 'repo.updated', 'staying');
  t.equal(e.rx.received(target.path).filter((d) => d.body.repository.name === 'leaving' && d.body.type === 'repo.updated').length, 1);
  const echoed = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body: { repo_ids: [gone.id, stays.id], name: 'renamed' } });
  t.equal(echoed.status, 200, 'repo_ids as read can be sent back');
  const narrowed = await e.s.api('PATCH', `/acme/webhook-targets/${target.id}`, { body: { repo_ids: [gone.id] } });
  t.equal(narrowed.status, 200, 'a target may keep only the departed id: it matches nothing, and is never []');
  const other = await createTarget(e, { events: ['repo.updated'], repo_ids: [stays.id] });
  const named = await e.s.api('PATCH', `/acme/webhook-targets/${other.id}`, { body: { repo_ids: [gone.id] } });
  t.equal(named.status, 400, 'the deleted repository cannot be added to a target that did not list it');
});

t.test('webhook delivery - a target that never answers does not delay another target', async (t) => {
  const repos = await Promise.all(Array.from({ length: 6 }, (_, i) => createRepo(e, `iso-${i}`)));
  const dead = await createTarget(e, { events: ['repo.updated'] });
  e.rx.behave(dead.path, () => 'hang');
  const live = await createTarget(e, { events: ['repo.updated'] });
  let worst = 0;
  for (let round = 0; round < 3; round++) {
    for (const repo of repos) {
      const started = Date.now();
      const res = await e.s.api('PATCH', `/acme/${repo.name}`, { body: { tags: { round: String(round) } } });
      t.equal(res.status, 200);
      await e.rx.waitFor(() => e.rx.received(live.path).some((d) => d.body.repository.id === repo.id && d.body.data.after.tags.round === String(round)), 1000, `live target, ${repo.name} round ${round}`);
      worst = Math.max(worst, Date.now() - started);
    }
  }
  t.ok(worst < 1000, `every event reached the live target within 1 s (worst ${worst} ms)`);
  t.ok(e.rx.received(dead.path).length >= 6, 'the dead target was being tried meanwhile');
  const log = await waitForLog(e, dead.id, (l) => l.length === 18);
  t.ok(log.every((d) => d.status === 'pending'), 'its deliveries wait, pending');
});

t.test('webhook delivery - an event log (every kind, org-wide) has every event once settled', async (t) => {
  const log = await startEventLog(e.s);
  t.teardown(() => log.close());
  const repo = await createRepo(e, 'logged');
  for (let i = 0; i < 5; i++) await e.s.api('PATCH', '/acme/logged', { body: { tags: { i: String(i) } } });
  await e.s.api('DELETE', '/acme/logged');
  await log.settled();
  const events = log.events(repo.id);
  t.same(events.map((x) => x.type), ['repo.created', 'bookmark.created', 'repo.updated', 'repo.updated', 'repo.updated', 'repo.updated', 'repo.updated', 'repo.deleted']);
  t.same(events.filter((x) => x.type === 'repo.updated').map((x) => (x.data.after as { tags: { i: string } }).tags.i), ['0', '1', '2', '3', '4'], 'in event order');
});
