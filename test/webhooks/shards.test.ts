import t from 'tap';
import { OwnedShards } from '../../src/actors/system/shard-ownership.js';
import { repoShard } from '../../src/storage/shards.js';
import { outboxEvents } from '../helpers/outbox.js';
import { PATH, startActor, tag } from './actor.js';

/**
 * The webhook queues per shard (docs/design.md "Webhooks"): each event waits in the outbox of its
 * repository's shard, its deliveries are kept there, and only the owner of that shard sends them.
 */

/** `count` repository ids spread over distinct shards. */
function reposOnDistinctShards(count: number): string[] {
  const byShard = new Map<number, string>();
  for (let i = 0; byShard.size < count; i++) {
    const id = `repo_${i}`;
    if (!byShard.has(repoShard(id))) byShard.set(repoShard(id), id);
  }
  return [...byShard.values()];
}

t.test('webhook shards - events of repositories on many shards reach one target once each, every repository in order', async (t) => {
  const a = await startActor(t);
  const repos = reposOnDistinctShards(64);
  const events: Array<[string, number]> = [];
  for (let n = 0; n < 8; n++) for (const repo of repos) events.push([repo, n]);
  // Written in two commits, as two batches of writes would be.
  a.emit(...events.slice(0, 200));
  a.emit(...events.slice(200));
  await a.rx.waitFor(() => a.rx.received(PATH).length >= events.length, 20_000, 'every delivery');
  for (const repo of repos) await a.settled(repo, 7, 1);
  const got = a.rx.received(PATH);
  t.equal(got.length, events.length, 'nothing sent twice');
  t.equal(new Set(got.map((d) => d.headers['x-svc-delivery'])).size, events.length, 'one delivery id per event');
  for (const repo of repos) {
    const lane = got.map(tag).filter((x) => x.startsWith(`${repo}:`));
    if (lane.join() !== Array.from({ length: 8 }, (_, n) => `${repo}:${n}`).join()) t.fail(`${repo} out of order: ${lane.join()}`);
  }
  const log = a.deliveries();
  t.equal(log.length, events.length, 'the delivery log, merged across shards, holds each delivery');
  t.same(log.map((d) => d.id), [...log.map((d) => d.id)].sort(), 'oldest first across shards');
  t.notOk(a.queued(), 'nothing left in the index');
});

t.test('webhook shards - events on a shard the node does not own stay queued until it is granted', async (t) => {
  const [mine, theirs] = reposOnDistinctShards(2) as [string, string];
  const ownership = new OwnedShards([repoShard(mine)]);
  const a = await startActor(t, { ownership });
  a.emit([mine, 1], [theirs, 1], [theirs, 2]);
  await a.settled(mine, 1, 1);
  // The dispatcher is woken once more and given time: nothing of the other shard moves.
  a.dispatcher.wake();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.same(a.rx.received(PATH).map(tag), [`${mine}:1`], 'only the owned shard\'s event was sent');
  t.same(outboxEvents(a.storage.meta).map((e) => `${e.repository!.id}:${String(e.data.n)}`), [`${theirs}:1`, `${theirs}:2`], 'the other shard\'s events wait in its outbox');

  ownership.grant(repoShard(theirs));
  await a.settled(theirs, 2, 1);
  t.same(a.rx.received(PATH).map(tag), [`${mine}:1`, `${theirs}:1`, `${theirs}:2`], 'sent, in order, once the shard is owned');
  t.same(outboxEvents(a.storage.meta), [], 'the outbox is drained');

  ownership.revoke(repoShard(mine));
  a.emit([mine, 2]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(a.rx.received(PATH).length, 3, 'a shard given up is drained no more');
  t.equal(outboxEvents(a.storage.meta).length, 1);
});

t.test('webhook shards - a pending delivery of a shard given up is not retried here; the next owner resumes it', async (t) => {
  const [repo] = reposOnDistinctShards(1) as [string];
  const ownership = new OwnedShards();
  const a = await startActor(t, { ownership, behave: (_req, nth) => ({ status: nth === 1 ? 503 : 200 }) });
  a.emit([repo, 1], [repo, 2]);
  const failed = await a.settled(repo, 1, 1);
  t.equal(failed.status, 'pending', 'the first attempt failed: the lane waits for its retry');

  ownership.revoke(repoShard(repo));
  a.retry(failed);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(a.rx.received(PATH).length, 1, 'no retry once the shard is not owned');

  ownership.grant(repoShard(repo));
  await a.settled(repo, 2, 1);
  t.same(a.rx.received(PATH).map(tag), [`${repo}:1`, `${repo}:1`, `${repo}:2`], 'resumed from the pending index, in order');
  t.equal(a.rx.received(PATH)[0]!.headers['x-svc-delivery'], a.rx.received(PATH)[1]!.headers['x-svc-delivery'], 'the retry under the same delivery id');
  t.notOk(a.queued());
});
