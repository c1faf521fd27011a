import t from 'tap';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { CATCH_UPS_PER_NODE, planPlacement, type PlacementWrite, type PlanInput } from '../../src/cluster/control/planner.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import type { ShardProgress } from '../../src/cluster/control/records.js';
import type { ShardPlacement } from '../../src/cluster/placement.js';

// The controller's decisions as a pure function: rendezvous targets, failure handling, and the
// debounce and move limits of rebalancing.
const nodes = (...ids: string[]) => ids.map((id) => ({ id }));

t.test('rendezvous: a new node takes about 1/N of the shards and nothing else moves', async (t) => {
  const three = nodes('a', 'b', 'c');
  const four = nodes('a', 'b', 'c', 'd');
  let moved = 0;
  for (let s = 0; s < SHARD_COUNT; s++) {
    const [before, after] = [rendezvousRank(three, s)[0], rendezvousRank(four, s)[0]];
    if (before !== after) {
      moved++;
      if (after !== 'd') t.fail(`shard ${s} moved from ${before} to ${after}`);
    }
  }
  t.ok(moved > 40 && moved < 90, `${moved} of 256 moved to the new node`);
  const heavy = [{ id: 'a', weight: 2 }, { id: 'b' }, { id: 'c' }];
  const share = Array.from({ length: SHARD_COUNT }, (_, s) => rendezvousRank(heavy, s)[0]).filter((o) => o === 'a').length;
  t.ok(share > 100 && share < 156, `a node of weight 2 of 4 wins ${share} of 256`);
});

interface Cluster {
  table: Map<number, { value: ShardPlacement; modRevision: string }>;
  progress: Map<string, ShardProgress>;
}

function input(c: Cluster, over: Partial<PlanInput> & { live: string[] }): PlanInput {
  return {
    shardCount: SHARD_COUNT,
    draining: new Set(),
    placement: (s) => c.table.get(s),
    progress: (node, s) => c.progress.get(`${node}/${s}`),
    replicas: 3,
    maxMoves: 8,
    stable: true,
    calm: true,
    ...over,
  };
}

/** Applies writes as etcd would (each entry's revision moves on). */
function apply(c: Cluster, writes: PlacementWrite[]): void {
  for (const w of writes) {
    const old = c.table.get(w.shard);
    t.equal(w.expected, old?.modRevision ?? '0', `shard ${w.shard} write expects the current revision`);
    c.table.set(w.shard, { value: w.next, modRevision: String(Number(w.expected) + 1) });
  }
}

/** Every follower reports itself caught up at its shard's epoch. */
function caughtUp(c: Cluster): void {
  c.progress.clear();
  for (const [s, { value }] of c.table) for (const f of value.followers) c.progress.set(`${f}/${s}`, { epoch: value.epoch, applied: 10, lag: 0 });
}

/** A table placed on `live`, every follower caught up. */
function placed(live: string[]): Cluster {
  const c: Cluster = { table: new Map(), progress: new Map() };
  apply(c, planPlacement(input(c, { live })));
  caughtUp(c);
  return c;
}

t.test('nothing is placed until the membership is stable; then every shard at once', async (t) => {
  const c: Cluster = { table: new Map(), progress: new Map() };
  t.same(planPlacement(input(c, { live: ['a', 'b', 'c'], stable: false })), []);
  const writes = planPlacement(input(c, { live: ['a', 'b', 'c'] }));
  t.equal(writes.length, SHARD_COUNT);
  t.ok(writes.every((w) => w.reason === 'place' && w.expected === '0' && w.next.epoch === 1 && new Set([w.next.owner, ...w.next.followers]).size === 3));
});

t.test("a lost owner's shards go to a follower at once, the best ranked that is caught up", async (t) => {
  const c = placed(['a', 'b', 'c', 'd']);
  const lostShards = [...c.table].filter(([, e]) => e.value.owner === 'a').map(([s]) => s);
  // One shard's best-ranked follower lags: the other, caught-up follower is chosen.
  const lagging = lostShards[0]!;
  const rank = rendezvousRank(nodes('b', 'c', 'd'), lagging);
  const followers = c.table.get(lagging)!.value.followers;
  const best = rank.find((id) => followers.includes(id))!;
  c.progress.set(`${best}/${lagging}`, { epoch: 1, applied: 1, lag: 500 });
  const writes = planPlacement(input(c, { live: ['b', 'c', 'd'], stable: false, calm: false }));
  const promotions = writes.filter((w) => w.reason === 'promote');
  t.equal(promotions.length, lostShards.length, 'every shard of the lost node, though the membership is unstable');
  for (const w of promotions) {
    const before = c.table.get(w.shard)!.value;
    if (!(w.next.epoch === before.epoch + 1 && before.followers.includes(w.next.owner) && w.next.followers.length === 2 && !w.next.followers.includes('a'))) t.fail(`shard ${w.shard}: ${JSON.stringify(w.next)}`);
  }
  t.not(writes.find((w) => w.shard === lagging)!.next.owner, best, 'the lagging follower is passed over');
  // Another's best-ranked follower reports no lag but has applied far less than the other (its
  // tail is not running): the one with the data is chosen.
  const stale = lostShards[1]!;
  const staleRank = rendezvousRank(nodes('b', 'c', 'd'), stale);
  const staleFollowers = c.table.get(stale)!.value.followers;
  const staleBest = staleRank.find((id) => staleFollowers.includes(id))!;
  c.progress.set(`${staleBest}/${stale}`, { epoch: 1, applied: 0, lag: 0 });
  for (const f of staleFollowers) if (f !== staleBest) c.progress.set(`${f}/${stale}`, { epoch: 1, applied: 500, lag: 0 });
  const again = planPlacement(input(c, { live: ['b', 'c', 'd'], stable: false, calm: false }));
  t.not(again.find((w) => w.shard === stale)!.next.owner, staleBest, 'a follower far behind the others is passed over, whatever lag it reports');
  const repairs = writes.filter((w) => w.reason === 'repair');
  t.ok(repairs.length > 0 && repairs.every((w) => !w.next.followers.includes('a') && w.next.followers.length === 2), `dead followers replaced (${repairs.length} repairs)`);
});

t.test('a join moves gracefully: follower first, flip only when caught up, K at a time', async (t) => {
  const c = placed(['a', 'b', 'c']);
  const live = ['a', 'b', 'c', 'd'];
  t.same(planPlacement(input(c, { live, calm: false })), [], 'nothing moves while a node is suspect');
  const first = planPlacement(input(c, { live }));
  t.equal(first.length, 8, 'K writes in the round');
  t.ok(first.every((w) => w.reason === 'move-follow' && w.next.followers.includes('d') && w.next.epoch === 1));
  apply(c, first);
  t.same(planPlacement(input(c, { live })), [], 'K shards in motion and none caught up: nothing more');
  const stuck = planPlacement(input(c, { live, maxMoves: 10 }));
  t.equal(stuck.length, 2, 'with K = 10, two more');
  caughtUp(c);
  const flips = planPlacement(input(c, { live }));
  t.ok(flips.length === 8 && flips.every((w) => w.reason === 'move-flip' && w.next.owner === 'd' && w.next.epoch === 2 && w.next.followers.length === 2));
  apply(c, flips);
  let rounds = 2;
  for (; rounds < 200; rounds++) {
    caughtUp(c);
    const writes = planPlacement(input(c, { live }));
    if (writes.length === 0) break;
    t.ok(writes.length <= 8, `round ${rounds}: ${writes.length} writes`);
    apply(c, writes);
  }
  const want = (s: number) => rendezvousRank(nodes(...live), s);
  t.ok([...c.table].every(([s, e]) => e.value.owner === want(s)[0] && [...e.value.followers].sort().join() === want(s).slice(1, 3).sort().join()), `settled on the rendezvous targets after ${rounds} rounds`);
  t.ok([...c.table.values()].every((e) => e.value.epoch <= 2), 'each shard changed owner at most once');
});

t.test('a join under a large K: the joiner catches up a few copies at a time, and flips come first', async (t) => {
  const c = placed(['a', 'b', 'c']);
  const live = ['a', 'b', 'c', 'd'];
  const maxMoves = 256;
  /** Shards where d is a follower that has not reported itself caught up. */
  const catchingUp = (): number => [...c.table].filter(([s, e]) => e.value.followers.includes('d') && c.progress.get(`d/${s}`)?.epoch !== e.value.epoch).length;
  const first = planPlacement(input(c, { live, maxMoves }));
  apply(c, first);
  t.ok(first.length > 0 && catchingUp() <= CATCH_UPS_PER_NODE, `the first round gives d ${catchingUp()} copies to catch up (at most ${CATCH_UPS_PER_NODE})`);
  t.ok(first.every((w) => w.reason === 'move-follow'), 'shards d is to own come first');
  t.same(planPlacement(input(c, { live, maxMoves })).filter((w) => w.next.followers.includes('d') || w.next.owner === 'd'), [], 'nothing more for d before it reports');
  caughtUp(c);
  const second = planPlacement(input(c, { live, maxMoves }));
  t.ok(second.filter((w) => w.reason === 'move-flip' && w.next.owner === 'd').length === first.length, 'the caught-up copies flip in the next round');
  let rounds = 2;
  let over = 0;
  for (let writes = second; writes.length > 0 && rounds < 200; rounds++, writes = planPlacement(input(c, { live, maxMoves }))) {
    apply(c, writes);
    if (catchingUp() > CATCH_UPS_PER_NODE) over++;
    caughtUp(c);
  }
  t.equal(over, 0, 'never more than the limit catching up');
  const want = (s: number) => rendezvousRank(nodes(...live), s);
  t.ok([...c.table].every(([s, e]) => e.value.owner === want(s)[0] && [...e.value.followers].sort().join() === want(s).slice(1, 3).sort().join()), `settled on the rendezvous targets after ${rounds} rounds`);
});

t.test('a drain empties the node; extra followers go only once the new ones caught up', async (t) => {
  const c = placed(['a', 'b', 'c', 'd']);
  const live = ['a', 'b', 'c', 'd'];
  const draining = new Set(['b']);
  let trimmedEarly = false;
  let trims = 0;
  const trimsBeforeReports = (): boolean =>
    planPlacement(input(c, { live, draining, maxMoves: 16 })).some(
      (w) => w.reason === 'trim' && w.next.followers.some((f) => c.progress.get(`${f}/${w.shard}`)?.epoch !== w.next.epoch),
    );
  for (let round = 0; round < 300; round++) {
    const writes = planPlacement(input(c, { live, draining, maxMoves: 16 }));
    if (writes.length === 0) break;
    trims += writes.filter((w) => w.reason === 'trim').length;
    apply(c, writes);
    // The round right after, before the new followers report: no follower may be dropped yet.
    if (trimsBeforeReports()) trimmedEarly = true;
    caughtUp(c);
  }
  t.ok(trims > 0, `extra followers were dropped (${trims})`);
  t.notOk(trimmedEarly, 'followers dropped only when the others reported in');
  t.ok([...c.table.values()].every((e) => e.value.owner !== 'b' && !e.value.followers.includes('b')), 'b owns and follows nothing');
  t.ok([...c.table.values()].every((e) => e.value.followers.length === 2), 'every shard keeps two followers');
});
