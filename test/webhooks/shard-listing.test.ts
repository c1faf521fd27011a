import t from 'tap';
import { repoShard } from '../../src/storage/shards.js';
import { deliveriesDrained } from '../helpers/webhook-receiver.js';
import { createRepo, createTarget, deliveries, sleep, startEnv, waitForLog, type Env } from './setup.js';

/**
 * A target's deliveries are kept on the shards of the repositories whose events they carry (a
 * redelivery on the org's): the delivery log, read through the API, is still one list, newest
 * first, paged by the same cursor.
 */
let e: Env;
t.before(async () => {
  e = await startEnv();
});
t.teardown(() => e.close());

t.test('webhook delivery log across shards - pages merge every shard newest first, a redelivery on top', async (t) => {
  const repos = [];
  for (let i = 0; i < 10; i++) repos.push(await createRepo(e, `spread-${i}`));
  t.ok(new Set(repos.map((r) => repoShard(r.id))).size >= 8, 'the repositories lie on many shards');
  const target = await createTarget(e, { events: ['repo.updated'], repo_ids: repos.map((r) => r.id) });
  for (let round = 0; round < 2; round++) {
    for (const r of repos) {
      const res = await e.s.api('PATCH', `/acme/${r.name}`, { body: { tags: { round: String(round) } } });
      if (res.status !== 200) throw new Error(`update: ${res.status}`);
    }
  }
  const all = await waitForLog(e, target.id, (l) => l.length === 20 && l.every((d) => d.status === 'succeeded'));
  const ids = all.map((d) => d.id as string);
  t.same(ids, [...ids].sort().reverse(), 'newest first');

  const paged: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await e.s.api('GET', `/acme/webhook-targets/${target.id}/deliveries?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    t.equal(res.status, 200);
    paged.push(...res.json.deliveries.map((d: { id: string }) => d.id));
    t.equal(res.json.has_more, res.json.next_cursor !== null);
    cursor = res.json.next_cursor;
  } while (cursor);
  t.same(paged, ids, 'pages of 3 give the same list, each delivery once');

  const redo = await e.s.api('POST', `/acme/webhook-targets/${target.id}/deliveries/${ids[ids.length - 1]}/redeliver`);
  t.equal(redo.status, 201);
  const after = await waitForLog(e, target.id, (l) => l.length === 21 && l[0].status === 'succeeded');
  t.equal(after[0].id, redo.json.id, 'the redelivery, kept on the org\'s shard, heads the merged list');
  const first = await e.s.api('GET', `/acme/webhook-targets/${target.id}/deliveries?limit=1`);
  const next = await deliveries(e, target.id, `?limit=2&cursor=${encodeURIComponent(first.json.next_cursor)}`);
  t.same(next.map((d) => d.id), ids.slice(0, 2), 'a cursor past the redelivery goes on with the other shards\' records');
});

t.test('webhook delivery log across shards - deleting a target clears its pending deliveries on every shard', async (t) => {
  const repos = [await createRepo(e, 'gone-a'), await createRepo(e, 'gone-b')];
  const target = await createTarget(e, { events: ['repo.updated'], repo_ids: repos.map((r) => r.id) });
  e.rx.behave(target.path, () => ({ status: 503 }));
  for (const r of repos) await e.s.api('PATCH', `/acme/${r.name}`, { body: { tags: { x: '1' } } });
  await waitForLog(e, target.id, (l) => l.length === 2 && l.every((d) => d.attempts >= 1));
  t.notOk(deliveriesDrained(e.s.dataDir, [target.id]), 'two deliveries wait for their retry');
  t.equal((await e.s.api('DELETE', `/acme/webhook-targets/${target.id}`)).status, 200);
  const deadline = Date.now() + 5000;
  while (!deliveriesDrained(e.s.dataDir, [target.id]) && Date.now() < deadline) await sleep(50);
  t.ok(deliveriesDrained(e.s.dataDir, [target.id]), 'their shards\' owner removed them');
});
