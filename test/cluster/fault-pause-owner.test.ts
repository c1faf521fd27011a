import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster } from '../helpers/cluster.js';
import { FAULT_CLUSTER, onEachLog, reposOwnedBy, runFaultScenario } from '../helpers/fault-scenarios.js';

/**
 * A stop-the-world pause of an owner (SIGSTOP) longer than its lease, then SIGCONT, under write
 * load that also goes through the paused node: its shards are served elsewhere within the lease
 * TTL + 1 s; whatever it answers after waking (its late appends are refused by the log) loses
 * nothing acknowledged and acknowledges nothing twice: the histories stay linearizable. The node
 * leaves on its lost lease and is started again.
 */
onEachLog(t, 'SIGSTOP of an owner past its lease, then SIGCONT', async (t, log) => {
  const cluster = await startCluster(t, { ...FAULT_CLUSTER, log });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const victim = await ctx.cluster.ownerOf(ctx.repos[0]!.shard);
      const measured = await reposOwnedBy(ctx, victim);
      ctx.faultAt();
      victim.pause();
      await sleep((ctx.cluster.leaseTtlS + 2) * 1000);
      victim.resume();
      t.comment(`paused ${victim.id} for ${ctx.cluster.leaseTtlS + 2} s, owner of ${measured.join(', ')}`);
      // A node that lost its lease exits (its supervisor restarts it); give it the time to notice.
      await sleep(2000);
      if (!victim.alive()) await victim.restart();
      await ctx.cluster.settled(40_000);
      return measured;
    },
  });
}, { everyRun: ['etcd'] });
