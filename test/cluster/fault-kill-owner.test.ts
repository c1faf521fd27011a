import t from 'tap';
import { startCluster } from '../helpers/cluster.js';
import { FAULT_CLUSTER, onEachLog, reposOwnedBy, runFaultScenario } from '../helpers/fault-scenarios.js';

/**
 * kill -9 of a shard owner under write load (issue #27): its shards come back on a promoted
 * follower within the lease TTL + 1 s; every acknowledged write stays readable; the bookmarks'
 * histories are linearizable.
 */
onEachLog(t, 'kill -9 of an owner under load', async (t, log) => {
  const cluster = await startCluster(t, { ...FAULT_CLUSTER, log });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const victim = await ctx.cluster.ownerOf(ctx.repos[0]!.shard);
      const measured = await reposOwnedBy(ctx, victim);
      ctx.faultAt();
      await victim.kill();
      t.comment(`killed ${victim.id}, owner of ${measured.join(', ')}`);
      await ctx.cluster.settled(30_000);
      return measured;
    },
  });
}, { everyRun: ['etcd', 'jetstream'] });
