import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster } from '../helpers/cluster.js';
import { FAULT_CLUSTER, onEachLog, runFaultScenario } from '../helpers/fault-scenarios.js';

/**
 * The engines' own failures under write load: kill -9 of the etcd Raft leader (both shard logs:
 * etcd is the control plane of both), and of the JetStream meta leader (the JetStream log only).
 * Writes resume once the engine elected a new leader; nothing acknowledged is lost and the
 * histories stay linearizable. The killed member is started again before the checks.
 */
onEachLog(t, 'kill -9 of the etcd leader', async (t, log) => {
  const cluster = await startCluster(t, { ...FAULT_CLUSTER, log });
  await runFaultScenario(t, cluster, {
    async fault(ctx) {
      const leader = await ctx.cluster.etcd.leader();
      await ctx.cluster.etcd.kill(leader);
      t.comment(`killed etcd member ${leader}`);
      await sleep(4000);
      await ctx.cluster.etcd.restart(leader);
      await ctx.cluster.settled(40_000);
    },
  });
}, { everyRun: ['etcd'] });

onEachLog(
  t,
  'kill -9 of the JetStream meta leader',
  async (t, log) => {
    const cluster = await startCluster(t, { ...FAULT_CLUSTER, log });
    await runFaultScenario(t, cluster, {
      async fault(ctx) {
        const nats = ctx.cluster.nats!;
        const leader = await nats.leader();
        await nats.kill(leader);
        t.comment(`killed nats-server ${leader}`);
        await sleep(6000);
        await nats.restart(leader);
        await ctx.cluster.settled(40_000);
      },
    });
  },
  { logs: ['jetstream'], everyRun: ['jetstream'] },
);
