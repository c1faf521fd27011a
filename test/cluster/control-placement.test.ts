import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { Registry } from 'prom-client';
import { registerControlPlaneMetrics } from '../../src/cluster/control/control-metrics.js';
import { requestDrain } from '../../src/cluster/control/drain.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import type { PlacementWrite } from '../../src/cluster/control/planner.js';
import { startEtcd } from '../helpers/cluster-engines.js';
import { CLI } from '../helpers/server.js';
import { closeAll, fullTable, settledTable, startControlNode, waitFor, type ControlTestNode, type ControlTestSettings } from '../helpers/control-nodes.js';

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
  const table = await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
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

t.test("a dead node's shards are promoted to a follower within about TTL + 1 s, epoch + 1", async (t) => {
  const ttlS = 2;
  const nodes = await startNodes(t, { cluster: 'failover', etcd: etcd.endpoints, ttlS }, ['a', 'b', 'c']);
  const before = await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
  const victim = nodes.find((n) => !n.plane.controller.isLeader())!;
  const watcher = nodes.find((n) => n !== victim)!;
  const started = Date.now();
  await victim.crash();
  await waitFor('no shard owned by the dead node', (ttlS + 3) * 1000, () => ownedBy(watcher, victim.id) === 0);
  const gap = Date.now() - started;
  // etcd expires leases in passes every 500 ms, and the machine is shared: TTL + 1.5 s at most.
  t.ok(gap <= ttlS * 1000 + 1500, `promoted ${gap} ms after the crash (TTL ${ttlS} s)`);
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
  const before = await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
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
  // The initial placement's round may end after the views saw the table: leave it out.
  const moves = rounds.map((r) => r.writes.filter((w) => w.reason !== 'place')).filter((w) => w.length);
  const largest = Math.max(...moves.map((w) => w.length));
  t.ok(largest <= maxMoves, `at most ${maxMoves} writes in a round (largest ${largest}, ${moves.length} rounds)`);
  t.ok(rounds.flatMap((r) => r.writes).every((w) => w.reason !== 'promote'), 'graceful: nothing promoted');
  t.ok(nodes[1]!.plane.membership.mayServe(), 'the drained node is still a member');
});

t.test('two joins in quick succession: one move per shard, at most K per round, after the debounce', async (t) => {
  const maxMoves = 6;
  const stableS = 1.5;
  const settings = { cluster: 'joins', etcd: etcd.endpoints, maxMoves, stableS };
  const nodes = await startNodes(t, settings, ['a', 'b', 'c']);
  await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
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

t.test('repohost cluster status shows the nodes, their leases and every shard', async (t) => {
  const nodes = await startNodes(t, { cluster: 'status', etcd: etcd.endpoints, ttlS: 5 }, ['a', 'b', 'c']);
  await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
  await nodes[0]!.plane.progress.flush();
  await requestDrain(nodes[0]!.plane.client, nodes[0]!.plane.keys, 'gone');
  const env = {
    ...process.env,
    REPOHOST_CLUSTER_ETCD: etcd.endpoints.join(','),
    REPOHOST_CLUSTER_NAME: 'status',
    REPOHOST_NODE_ID: 'ops',
    REPOHOST_NODE_INTERNAL_URL: 'http://127.0.0.1:9',
    REPOHOST_SHARD_LOG: 'etcd',
  };
  const run = (args: string[]) => promisify(execFile)(process.execPath, [CLI, 'cluster', 'status', ...args], { env, timeout: 20_000 });
  const { stdout } = await run(['--json']);
  const status = JSON.parse(stdout);
  t.equal(status.cluster, 'status');
  t.ok(['a', 'b', 'c'].includes(status.controller), `controller ${status.controller}`);
  t.same(status.nodes.map((n: any) => n.id), ['a', 'b', 'c']);
  t.ok(status.nodes.every((n: any) => n.leaseTtlS === 5 && n.leaseRemainingS >= 3), 'each lease with its time left');
  t.equal(status.nodes.reduce((sum: number, n: any) => sum + n.owns, 0), SHARD_COUNT, 'the owners add up to 256 shards');
  t.same(status.drainingAbsent, ['gone']);
  t.equal(status.unplaced, 0);
  t.equal(status.shards.length, SHARD_COUNT);
  const first = status.shards[0];
  t.same({ owner: first.owner, epoch: first.epoch, followers: first.followers }, nodes[0]!.plane.view.shard(0), 'shard 0 as the views see it');
  t.ok(status.shards.some((s: any) => s.lag === 0), "followers' lag from their progress reports");
  const registry = new Registry();
  const controller = nodes.find((n) => n.plane.controller.isLeader())!;
  registerControlPlaneMetrics(registry, controller.plane);
  const metrics = await registry.metrics();
  t.match(metrics, /repohost_cluster_lease_state\{status="serving"\} 1/);
  t.match(metrics, /repohost_cluster_controller 1/);
  t.match(metrics, /repohost_cluster_placement_writes_total\{reason="place"\} 256/);
  t.match(metrics, new RegExp(`repohost_cluster_shards\\{role="owner"\\} ${status.nodes.find((n: any) => n.id === controller.id).owns}\n`));
  const human = (await run([])).stdout;
  t.match(human, /^cluster status: 3 nodes, controller [abc], 256\/256 shards placed/);
  t.match(human, /\nshard\s+owner\s+epoch\s+followers\s+lag\s+log\n/);
  const single = await promisify(execFile)(process.execPath, [CLI, 'cluster', 'status'], { env: { ...process.env, REPOHOST_CLUSTER_ETCD: '' } }).catch((err: { code: number; stderr: string }) => err);
  t.match(single, { code: 1, stderr: /cluster status needs cluster mode/ }, 'a single node says what is missing');
});

t.test('a node id is one member at a time: a restart waits for the old lease, its shards move first', async (t) => {
  const ttlS = 2;
  const settings = { cluster: 'restart', etcd: etcd.endpoints, ttlS, stableS: 0.5 };
  const nodes = await startNodes(t, settings, ['a', 'b', 'c']);
  const before = await waitFor('a settled placement table', 20_000, () => settledTable(nodes[0]!, ['a', 'b', 'c']));
  const victim = nodes.find((n) => !n.plane.controller.isLeader())!;
  const watcher = nodes.find((n) => n !== victim)!;
  const twin = await startControlNode(settings, victim.id).then(
    (n) => n,
    (err: Error) => err,
  );
  t.match(twin, { message: `node id ${victim.id} is registered by another live process` }, 'a second process with a live id is refused');
  if (!(twin instanceof Error)) await twin.crash();
  await victim.crash();
  const started = Date.now();
  const again = await startControlNode(settings, victim.id);
  t.teardown(() => again.crash());
  t.ok(Date.now() - started >= 1000, `the restart joined ${Date.now() - started} ms later, once the old lease expired`);
  await waitFor(
    'the shards back on their rendezvous owner',
    20_000,
    () => {
      const table = fullTable(watcher);
      return table?.every((p, s) => p.owner === before[s]!.owner && p.followers.length === 2);
    },
    () => {
      const table = fullTable(watcher);
      if (!table) return `${watcher.id} does not see every shard placed`;
      const off = table.filter((p, s) => p.owner !== before[s]!.owner).length;
      const short = table.filter((p) => p.followers.length !== 2);
      const leader = [...nodes, again].find((n) => n.plane.controller.isLeader())?.id ?? 'none';
      return `${off} shards off their owner, ${short.length} without 2 followers (first: ${JSON.stringify(short[0] ?? null)}); controller ${leader}`;
    },
  );
  const table = fullTable(watcher)!;
  const moved = table.filter((p, s) => before[s]!.owner === victim.id && p.epoch === before[s]!.epoch + 2).length;
  t.equal(moved, before.filter((p) => p.owner === victim.id).length, "each of the node's shards was promoted elsewhere, then moved back (epoch + 2)");
});
