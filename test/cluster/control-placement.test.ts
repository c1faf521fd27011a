import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { requestDrain } from '../../src/cluster/control/drain.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import type { PlacementWrite } from '../../src/cluster/control/planner.js';
import { startEtcd } from '../helpers/cluster-engines.js';
import { closeAll, fullTable, startControlNode, waitFor, type ControlTestNode, type ControlTestSettings } from '../helpers/control-nodes.js';

// The placement protocol on a real 3-member etcd, with several control-plane nodes (each with its
// own client and lease) in this process. Each test uses its own cluster name on the shared etcd.
const etcd = await startEtcd();
t.teardown(() => etcd.stop());

async function startNodes(t: Test, settings: ControlTestSettings, ids: string[]): Promise<ControlTestNode[]> {
  const nodes = await Promise.all(ids.map((id) => startControlNode(settings, id)));
  t.teardown(() => closeAll(nodes));
  return nodes;
}

const owners = (node: ControlTestNode): string[] => Array.from({ length: SHARD_COUNT }, (_, s) => node.plane.view.shard(s)?.owner ?? '');
const ownedBy = (node: ControlTestNode, id: string): number => owners(node).filter((o) => o === id).length;

/** Every applied write of every controller, with when it was applied. */
function recordWrites(nodes: ControlTestNode[]): Array<{ at: number; writes: PlacementWrite[] }> {
  const rounds: Array<{ at: number; writes: PlacementWrite[] }> = [];
  for (const n of nodes) n.plane.controller.onRound((writes) => rounds.push({ at: Date.now(), writes }));
  return rounds;
}

t.test('initial placement covers every shard with distinct followers, by rendezvous rank', async (t) => {
  const ids = ['a', 'b', 'c'];
  const nodes = await startNodes(t, { cluster: 'initial', etcd: etcd.endpoints, stableS: 1 }, ids);
  const table = await waitFor('a full placement table', 15_000, () => fullTable(nodes[0]!));
  let distinct = 0;
  for (const [shard, p] of table.entries()) {
    if (p.epoch === 1 && p.followers.length === 2 && new Set([p.owner, ...p.followers]).size === 3 && ids.includes(p.owner) && p.followers.every((f) => ids.includes(f))) distinct++;
    const rank = rendezvousRank(ids.map((id) => ({ id })), shard);
    if (p.owner !== rank[0]) t.fail(`shard ${shard}: owner ${p.owner}, rendezvous says ${rank[0]}`);
  }
  t.equal(distinct, SHARD_COUNT, 'each shard: epoch 1, an owner and 2 other nodes as followers');
  for (const id of ids) {
    const n = ownedBy(nodes[0]!, id);
    t.ok(n > 50 && n < 120, `${id} owns ${n} of 256`);
  }
  t.equal(nodes.filter((n) => n.plane.controller.isLeader()).length, 1, 'exactly one controller');
  await waitFor('every view to agree', 5_000, () => nodes.every((n) => JSON.stringify(fullTable(n)) === JSON.stringify(table)));
  t.same(nodes[2]!.plane.view.nodes().map((n) => n.id), ids, 'every view lists the members');
});

t.test("a dead node's shards are promoted to a follower within TTL + 1 s, epoch + 1", async (t) => {
  const ttlS = 2;
  const nodes = await startNodes(t, { cluster: 'failover', etcd: etcd.endpoints, ttlS }, ['a', 'b', 'c']);
  const before = await waitFor('a full placement table', 15_000, () => fullTable(nodes[0]!));
  const victim = nodes.find((n) => !n.plane.controller.isLeader())!;
  const watcher = nodes.find((n) => n !== victim)!;
  const started = Date.now();
  await victim.crash();
  await waitFor('no shard owned by the dead node', (ttlS + 3) * 1000, () => ownedBy(watcher, victim.id) === 0);
  const gap = Date.now() - started;
  t.ok(gap <= ttlS * 1000 + 1000, `promoted ${gap} ms after the crash (TTL ${ttlS} s)`);
  const after = await waitFor('the dead node gone from every follower list', 3_000, () => {
    const table = fullTable(watcher);
    return table?.every((p) => !p.followers.includes(victim.id)) ? table : undefined;
  });
  let promoted = 0;
  for (let s = 0; s < SHARD_COUNT; s++) {
    const [b, a] = [before[s]!, after[s]!];
    if (b.owner === victim.id) {
      if (a.epoch === b.epoch + 1 && b.followers.includes(a.owner)) promoted++;
      else t.fail(`shard ${s}: ${JSON.stringify(b)} became ${JSON.stringify(a)}`);
    } else if (a.owner !== b.owner || a.epoch !== b.epoch) {
      t.fail(`shard ${s} of a live owner moved: ${JSON.stringify(b)} → ${JSON.stringify(a)}`);
    }
    if (a.followers.length !== 1 || a.followers[0] === a.owner) t.fail(`shard ${s}: followers ${JSON.stringify(a.followers)}`);
  }
  t.ok(promoted > 50, `${promoted} shards promoted to a follower with epoch + 1`);
});

t.test('a drained node ends up owning and following nothing, within the move limit', async (t) => {
  const maxMoves = 16;
  const nodes = await startNodes(t, { cluster: 'drain', etcd: etcd.endpoints, maxMoves, stableS: 0.3 }, ['a', 'b', 'c']);
  const before = await waitFor('a full placement table', 15_000, () => fullTable(nodes[0]!));
  const rounds = recordWrites(nodes);
  await requestDrain(nodes[0]!.plane.client, nodes[0]!.plane.keys, 'b');
  const after = await waitFor('b empty', 30_000, () => {
    const table = fullTable(nodes[0]!);
    return table?.every((p) => p.owner !== 'b' && !p.followers.includes('b')) ? table : undefined;
  });
  for (let s = 0; s < SHARD_COUNT; s++) {
    const [b, a] = [before[s]!, after[s]!];
    const expected = b.owner === 'b' ? b.epoch + 1 : b.epoch;
    if (a.epoch !== expected) t.fail(`shard ${s}: epoch ${b.epoch} → ${a.epoch}`);
  }
  const largest = Math.max(...rounds.map((r) => r.writes.length));
  t.ok(largest <= maxMoves, `at most ${maxMoves} writes in a round (largest ${largest}, ${rounds.length} rounds)`);
  t.ok(rounds.flatMap((r) => r.writes).every((w) => w.reason !== 'promote'), 'graceful: nothing promoted');
  t.ok(nodes[1]!.plane.membership.mayServe(), 'the drained node is still a member');
});

t.test('two joins in quick succession: one move per shard, at most K per round, after the debounce', async (t) => {
  const maxMoves = 6;
  const stableS = 1.5;
  const settings = { cluster: 'joins', etcd: etcd.endpoints, maxMoves, stableS };
  const nodes = await startNodes(t, settings, ['a', 'b', 'c']);
  await waitFor('a full placement table', 15_000, () => fullTable(nodes[0]!));
  await sleep(500);
  const rounds = recordWrites(nodes);
  const ownerChanges = new Array<number>(SHARD_COUNT).fill(0);
  let last = owners(nodes[0]!);
  nodes[0]!.plane.view.onChange(() => {
    const now = owners(nodes[0]!);
    now.forEach((o, s) => {
      if (o !== last[s]) ownerChanges[s]!++;
    });
    last = now;
  });
  const joined = [await startControlNode(settings, 'd')];
  await sleep(300);
  const secondJoin = Date.now();
  joined.push(await startControlNode(settings, 'e'));
  t.teardown(() => closeAll(joined));
  const ids = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id }));
  await waitFor('every shard on its rendezvous target', 60_000, () => owners(nodes[0]!).every((o, s) => o === rendezvousRank(ids, s)[0]));
  const moved = ownerChanges.filter((n) => n > 0).length;
  t.ok(moved > 60, `${moved} shards moved to the new nodes`);
  t.equal(Math.max(...ownerChanges), 1, 'no shard changed owner twice');
  const moves = rounds.filter((r) => r.writes.some((w) => w.reason !== 'place'));
  t.ok(moves.every((r) => r.writes.length <= maxMoves), `at most ${maxMoves} writes per round (largest ${Math.max(...moves.map((r) => r.writes.length))})`);
  const first = Math.min(...moves.map((r) => r.at));
  t.ok(first - secondJoin >= stableS * 1000 - 100, `first move ${first - secondJoin} ms after the second join (debounce ${stableS} s)`);
  t.ok(rounds.flatMap((r) => r.writes).filter((w) => w.reason === 'move-flip').length >= moved, 'each move flipped after its follower caught up');
});
