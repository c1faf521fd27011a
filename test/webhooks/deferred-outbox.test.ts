import t from 'tap';
import { outboxEvents } from '../helpers/outbox.js';
import { PATH, startActor, tag, type Actor } from './actor.js';

/**
 * Events nobody hears stay in their outbox a while (outbox-fan-out.ts `DeferredEvents`): taking
 * them alone would be a write on their shard, and in a cluster one more log append per API write.
 * The target of `startActor` hears `repo.updated` only; `bookmark.created` goes to nobody.
 */

const QUIET = 'bookmark.created';

/** The id of the environment's last committed transaction. */
const lastTxn = (a: Actor): number => (a.storage.root.getStats() as { lastTxnId: number }).lastTxnId;

/** Lets the actor drain what it was woken for (its polls run on the real event loop). */
const drained = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 150));

const outboxTags = (a: Actor): string[] => outboxEvents(a.storage.meta).map((e) => `${e.repository!.id}:${String(e.data.n)}`);

t.test('deferred outbox - events nobody hears are examined without a write, then taken with the next one heard', async (t) => {
  const a = await startActor(t);
  a.emit(['r1', 1, QUIET], ['r1', 2, QUIET]);
  await drained();
  const before = lastTxn(a);
  a.emit(['r1', 3, QUIET]);
  await drained();
  t.equal(lastTxn(a), before + 1, 'the drain wrote nothing: the only commit is the event\'s own');
  t.same(outboxTags(a), ['r1:1', 'r1:2', 'r1:3'], 'they wait in the outbox');
  t.same(a.deliveries(), [], 'and nothing is delivered');

  a.emit(['r1', 4]);
  await a.rx.waitFor(() => a.rx.received(PATH).length >= 1, 5000, 'the heard event');
  t.same(a.rx.received(PATH).map(tag), ['r1:4']);
  t.same(outboxTags(a), [], 'the events left before it are taken along');
  t.equal(a.deliveries().length, 1, 'still only the one heard is delivered');
});

t.test('deferred outbox - events left are taken once they have waited long enough', async (t) => {
  const a = await startActor(t);
  a.emit(['r1', 1, QUIET], ['r2', 1, QUIET]);
  await drained();
  t.equal(outboxTags(a).length, 2, 'left in the outbox');
  a.clock.advanceTo(a.clock.now() + 29_000);
  a.dispatcher.wake();
  await drained();
  t.equal(outboxTags(a).length, 2, 'still there before their time');
  a.clock.advanceTo(a.clock.now() + 1_000);
  a.dispatcher.wake();
  await drained();
  t.same(outboxTags(a), [], 'taken after 30 s');
  t.same(a.deliveries(), []);
});

t.test('deferred outbox - a shard holding many events nobody hears has them taken at once', async (t) => {
  const a = await startActor(t);
  a.emit(...Array.from({ length: 255 }, (_, n): [string, number, string] => ['r1', n, QUIET]));
  await drained();
  t.equal(outboxTags(a).length, 255, '255 are left');
  a.emit(['r1', 255, QUIET]);
  await drained();
  // The 256th makes the shard due: the next drain takes them all.
  a.dispatcher.wake();
  await drained();
  t.same(outboxTags(a), [], 'the 256th brings them all out');
  t.same(a.deliveries(), []);
});

t.test('deferred outbox - after a restart the events left are examined again and a heard one is still delivered', async (t) => {
  const a = await startActor(t);
  a.emit(['r1', 1, QUIET], ['r1', 2]);
  await a.rx.waitFor(() => a.rx.received(PATH).length >= 1, 5000, 'the heard event');
  a.emit(['r1', 3, QUIET]);
  await drained();
  await a.restart();
  a.emit(['r1', 4]);
  await a.rx.waitFor(() => a.rx.received(PATH).length >= 2, 5000, 'the heard event after the restart');
  t.same(a.rx.received(PATH).map(tag), ['r1:2', 'r1:4']);
  t.same(outboxTags(a), []);
});
