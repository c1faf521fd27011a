import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster, type TestCluster, type TestNode } from '../helpers/cluster.js';
import { CLI_NODE_SETTINGS } from '../helpers/cluster-settings.js';
import { runCli } from '../helpers/server.js';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import { FAULT_CLUSTER, onEachLog, runFaultScenario } from '../helpers/fault-scenarios.js';

/**
 * Join and drain under write load: a fourth node joins and takes shards, then a node is drained
 * and gives all of its shards away; moves are graceful, so the histories stay linearizable and
 * every acknowledged write stays readable. The comments give the join's and the drain's times; a
 * join that fails prints the controllers' decisions, the joiner's copies and its warnings.
 */
onEachLog(t, 'join and drain under load', async (t, log) => {
  const cluster = await startCluster(t, { ...FAULT_CLUSTER, log });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const placements = async (): Promise<Array<{ owner: string; followers: string[] }>> => {
        for (const n of ctx.cluster.live()) {
          const status = await n.status().catch(() => null);
          if (status) return status.shards.map((s) => s.placement ?? { owner: '', followers: [] });
        }
        return [];
      };
      /** Polls until `done` holds (up to 40 s); returns whether it did. */
      const until = async (done: () => Promise<boolean>): Promise<boolean> => {
        const deadline = Date.now() + 40_000;
        while (Date.now() < deadline) {
          if (await done()) return true;
          await sleep(500);
        }
        return false;
      };
      const serves = async (node: TestNode): Promise<number> =>
        ((await node.status().catch(() => null))?.shards ?? []).filter((s) => s.state === 'active' && s.placement?.owner === node.id).length;
      const joinedAt = Date.now();
      const joined = await ctx.cluster.addNode();
      const started = Date.now();
      const given = await until(async () => (await placements()).some((s) => s.owner === joined.id));
      const givenAt = Date.now();
      const served = given && (await until(async () => (await serves(joined)) > 0));
      const servedAt = Date.now();
      if (!given) t.comment(await diagnosis(ctx.cluster, joined, await placements()));
      t.ok(given, `${joined.id} joined and was given shards`);
      t.ok(served, `${joined.id} serves a shard`);
      await ctx.cluster.settled(40_000);
      // The shards the joined node is to own: the rendezvous share of the four nodes.
      const ids = ctx.cluster.live().map((n) => ({ id: n.id }));
      const share = Array.from({ length: SHARD_COUNT }, (_, s) => rendezvousRank(ids, s)[0]).filter((id) => id === joined.id).length;
      let owned = 0;
      await until(async () => (owned = (await placements()).filter((s) => s.owner === joined.id).length) >= share);
      t.comment(
        `join: the node started in ${started - joinedAt} ms; its first shard was placed ${givenAt - started} ms and served ${servedAt - started} ms after; it owned ${owned} of its ${share} shards ${Date.now() - started} ms after`,
      );
      const drained = ctx.cluster.nodes[0]!;
      const drainAt = Date.now();
      await ctx.cluster.drain(drained);
      const empty = await until(async () => {
        const p = await placements();
        return p.length > 0 && p.every((s) => s.owner !== drained.id && !s.followers.includes(drained.id));
      });
      t.ok(empty, `${drained.id} drained: it owns and follows no shard (${Date.now() - drainAt} ms after the request)`);
      await ctx.cluster.settled(40_000);
    },
  });
}, { everyRun: ['etcd'] });

/** What the controllers decided and where the joined node's copies stand, for a failed join. */
async function diagnosis(cluster: TestCluster, joined: TestNode, placed: Array<{ owner: string; followers: string[] }>): Promise<string> {
  const decisions = cluster.nodes.flatMap((n) => n.logs.filter((l) => /placement written|rebalancing/.test(l)).map((l) => `${n.id} ${l.trim()}`));
  const copies = new Map<string, number>();
  const own = await joined.status().catch(() => null);
  for (const s of own?.shards ?? []) {
    if (s.role === 'none') continue;
    const kind = `${s.role} ${s.state} lag ${s.lag > 64 ? '> 64' : '<= 64'}`;
    copies.set(kind, (copies.get(kind) ?? 0) + 1);
  }
  const status = await runCli(['cluster', 'status'], { ...cluster.env, ...CLI_NODE_SETTINGS }, 20_000);
  const follows = placed.filter((p) => p.followers.includes(joined.id)).length;
  return [`${joined.id} follows ${follows} shards by the placement`, 'controller decisions:', ...decisions.slice(-40), `${joined.id} copies: ${JSON.stringify([...copies])}`, 'repohost cluster status:', ...status.stdout.split('\n').slice(0, 8), `${joined.id} warnings and errors:`, ...joined.logs.filter((l) => /"level":"(warn|error)"/.test(l)).slice(-30)].join('\n');
}
