/**
 * `agent-fleet`: N agents, each on its own repository and bookmark, each `apply-ops` writing
 * 3 × 2 KiB as a new change on top of its previous change and advancing its bookmark in the same
 * call. Writes to different repositories should scale with worker count.
 */
import { createAgents, runWritePhases, serverWriteMetrics, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { finishResult, resultBase } from './result.js';
import type { Scenario } from './types.js';

export const agentFleet: Scenario = {
  name: 'agent-fleet',
  description: 'apply-ops: N agents, one repository and bookmark each, chained changes',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const n = ctx.settings.agents;
    const base = resultBase(this, null, writeParameters(ctx, n, ctx.settings.openRates));
    const { agents } = await createAgents(ctx, { count: n, sharedRepo: null, repoPrefix: `${ctx.prefix}-fleet`, seedFile: null });
    const out = await runWritePhases(ctx, { label: 'agent-fleet', agents, readRatio: 0, readPaths: [], openRates: ctx.settings.openRates });
    const verification = await verifyAgents(ctx, out.agents);
    return finishResult(base, out.phases, verification, { acknowledgedWrites: totalWrites(out.agents), ...serverWriteMetrics(out.phases) });
  },
};
