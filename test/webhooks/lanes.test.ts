import t from 'tap';
import { PATH, startActor, tag } from './actor.js';

/** Lanes (API §11.3 order) holding more deliveries than fit in memory, on the actor of actor.ts. */

t.test('webhook lanes - a lane with more deliveries than it holds in memory sends each once, in event order', async (t) => {
  // 300 events of each of two repositories fan out at once: each lane takes what fits in memory
  // and leaves the rest to be read back from the pending index.
  const a = await startActor(t);
  const events: Array<[string, number]> = [];
  for (let n = 0; n < 300; n++) events.push(['one', n], ['two', n]);
  a.emit(...events);
  await a.rx.waitFor(() => a.rx.received(PATH).length >= 600, 20_000, 'every delivery');
  await a.settled('one', 299, 1);
  await a.settled('two', 299, 1);
  const got = a.rx.received(PATH).map(tag);
  t.equal(got.length, 600, 'each sent once');
  for (const repo of ['one', 'two']) {
    t.same(got.filter((x) => x.startsWith(`${repo}:`)), Array.from({ length: 300 }, (_, n) => `${repo}:${n}`), `${repo} in event order`);
  }
  t.notOk(a.queued(), 'nothing left in the index');
});

t.test('webhook lanes - after a restart mid-stream the rest goes out in order, anything sent again under its own id', async (t) => {
  const a = await startActor(t);
  const events: Array<[string, number]> = [];
  for (let n = 0; n < 200; n++) events.push(['one', n]);
  a.emit(...events);
  await a.rx.waitFor(() => a.rx.received(PATH).length >= 20, 5000, 'the first deliveries');
  await a.restart();
  await a.rx.waitFor(() => new Set(a.rx.received(PATH).map(tag)).size === 200, 20_000, 'every event');
  await a.settled('one', 199, 1);
  const firsts = new Map<string, string>();
  for (const d of a.rx.received(PATH)) {
    const id = d.headers['x-svc-delivery'] as string;
    if (firsts.has(tag(d))) t.equal(id, firsts.get(tag(d)), `${tag(d)} sent again under the same id`);
    else firsts.set(tag(d), id);
  }
  t.same([...firsts.keys()], Array.from({ length: 200 }, (_, n) => `one:${n}`), 'first arrivals in event order');
  t.notOk(a.queued(), 'nothing left in the index');
});
