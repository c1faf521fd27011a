/**
 * `hot-repo`: the agent-fleet workload with every agent on one repository (each on its own
 * bookmark). All writes go through one repository actor, so this measures the single-writer path:
 * its mailbox, group commit and one flush per batch.
 */
import { createAgents, runWritePhases, serverWriteMetrics, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { finishResult, resultBase } from './result.js';
import type { Scenario } from './types.js';

export const hotRepo: Scenario = {
  name: 'hot-repo',
  description: 'apply-ops: N agents on one repository, one bookmark each',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const n = ctx.settings.agents;
    const base = resultBase(this, null, writeParameters(ctx, n, ctx.settings.openRates));
    const repo = `${ctx.prefix}-hot`;
    const { agents } = await createAgents(ctx, { count: n, sharedRepo: repo, repoPrefix: repo, seedFile: null });
    const out = await runWritePhases(ctx, { label: 'hot-repo', agents, readRatio: 0, readPaths: [], openRates: ctx.settings.openRates });
    const verification = await verifyAgents(ctx, out.agents);
    return finishResult(base, out.phases, verification, { acknowledgedWrites: totalWrites(out.agents), ...serverWriteMetrics(out.phases) });
  },
};
