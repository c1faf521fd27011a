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
      const joined = await ctx.cluster.addNode();
      await ctx.cluster.settled(40_000);
      const owned = (await joined.status()).shards.filter((s) => s.placement?.owner === joined.id).length;
      t.ok(owned > 0, `${joined.id} joined and owns ${owned} shards`);
      const drained = ctx.cluster.nodes[0]!;
      await ctx.cluster.drain(drained);
      const deadline = Date.now() + 40_000;
      let left = Infinity;
      while (Date.now() < deadline && left > 0) {
        await sleep(500);
        left = (await joined.status()).shards.filter((s) => s.placement?.owner === drained.id || s.placement?.followers.includes(drained.id)).length;
      }
      t.equal(left, 0, `${drained.id} drained: it owns and follows no shard`);
      await ctx.cluster.settled(40_000);
    },
  });
});
