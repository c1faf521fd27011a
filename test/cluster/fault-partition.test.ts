import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster } from '../helpers/cluster.js';
import { FAULT_CLUSTER, onEachLog, reposOwnedBy, runFaultScenario } from '../helpers/fault-scenarios.js';
import { createNetLab, netnsAvailable } from '../helpers/netns.js';

/**
 * A partition that isolates one node: every node runs in its own network namespace, the engines
 * on the bridge. The owner of a repository is cut from the engines and from the other nodes
 * (nft drop rules in its namespace) for longer than its lease: it stops serving on its own, its
 * shards move within the lease TTL + 1 s, and after healing it comes back (restarted if it left)
 * without a lost or doubled acknowledged write.
 */
const noNetns = netnsAvailable() ? null : 'network namespaces need root, ip and nft';

if (noNetns) t.test('a partition isolating an owner', { skip: noNetns }, () => undefined);
else onEachLog(t, 'a partition isolating an owner', async (t, log) => {
  const lab = await createNetLab();
  t.teardown(() => lab.teardown());
  const cluster = await startCluster(t, { ...FAULT_CLUSTER, log, lab });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const victim = await ctx.cluster.ownerOf(ctx.repos[0]!.shard);
      const measured = await reposOwnedBy(ctx, victim);
      const others = ctx.cluster.nodes.filter((n) => n !== victim);
      ctx.faultAt();
      await lab.cut(victim.net!, { peer: lab.hostAddress });
      for (const o of others) await lab.cut(victim.net!, { peer: o.net!.address });
      t.comment(`isolated ${victim.id}, owner of ${measured.join(', ')}`);
      await sleep((ctx.cluster.leaseTtlS + 3) * 1000);
      await lab.heal(victim.net!);
      await sleep(2000);
      if (!victim.alive()) await victim.restart();
      await ctx.cluster.settled(40_000);
      return measured;
    },
  });
}, { everyRun: ['etcd'] });
