import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFaultCluster } from '../helpers/cluster.js';
import { onEachLog, runFaultScenario } from '../helpers/fault-scenarios.js';

/**
 * Join and drain under write load: a fourth node joins and takes shards, then a node is drained
 * and gives all of its shards away; moves are graceful, so the histories stay linearizable and
 * every acknowledged write stays readable.
 */
onEachLog(t, 'join and drain under load', async (t, log) => {
  const cluster = await startFaultCluster(t, { log });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const placements = async (): Promise<Array<{ owner: string; followers: string[] }>> => {
        for (const n of ctx.cluster.live()) {
          const status = await n.status().catch(() => null);
          if (status) return status.shards.map((s) => s.placement ?? { owner: '', followers: [] });
        }
        return [];
      };
      /** Polls until `done` holds for the placement table (up to 40 s); returns whether it did. */
      const until = async (done: (p: Array<{ owner: string; followers: string[] }>) => boolean): Promise<boolean> => {
        const deadline = Date.now() + 40_000;
        while (Date.now() < deadline) {
          if (done(await placements())) return true;
          await sleep(500);
        }
        return false;
      };
      const joined = await ctx.cluster.addNode();
      t.ok(await until((p) => p.some((s) => s.owner === joined.id)), `${joined.id} joined and was given shards`);
      await ctx.cluster.settled(40_000);
      const drained = ctx.cluster.nodes[0]!;
      await ctx.cluster.drain(drained);
      t.ok(await until((p) => p.length > 0 && p.every((s) => s.owner !== drained.id && !s.followers.includes(drained.id))), `${drained.id} drained: it owns and follows no shard`);
      await ctx.cluster.settled(40_000);
    },
  });
});
