/**
 * `mixed`: the agents of agent-fleet, each request a read with probability 90 % (alternating
 * repository metadata and a 4 KiB file) or otherwise a write. Latency is reported per kind.
 */
import { createAgents, runWritePhases, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { finishResult, resultBase } from './result.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

const SEED = 'seed.txt';

export const mixed: Scenario = {
  name: 'mixed',
  description: 'agents doing 90 % reads (metadata, 4 KiB content) and 10 % apply-ops writes',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const { target } = requireTarget(ctx);
    const s = ctx.settings;
    const n = s.agents;
    const base = resultBase(this, null, { ...writeParameters(ctx, n), readRatio: s.mixedReadRatio });
    const { agents } = await createAgents(ctx, { count: n, sharedRepo: null, repoPrefix: `${ctx.prefix}-mixed`, seedFile: SEED });
    const readPaths = [`/v1/${target.org}/{repo}`, `/v1/${target.org}/{repo}/content?path=${SEED}`];
    const out = await runWritePhases(ctx, { label: 'mixed', agents, readRatio: s.mixedReadRatio, readPaths });
    const verification = await verifyAgents(ctx, out.agents);
    return finishResult(base, out.phases, verification, { acknowledgedWrites: totalWrites(out.agents) });
  },
};
