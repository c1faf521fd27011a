/**
 * The pure write scenarios (agent-fleet, hot-repo): N agents, each on its own bookmark, writing
 * in a closed loop and then in open loops (`--open-rates`, or the open fraction), every
 * acknowledged write verified at the end. They differ only in the repositories the agents share.
 */
import { createAgents, runWritePhases, serverWriteMetrics, totalWrites, verifyAgents, writeParameters, type AgentSetup } from './agent-writes.js';
import { finishResult, resultBase } from './result.js';
import type { Scenario, ScenarioContext } from './types.js';

export interface WriteFleet {
  name: string;
  description: string;
  /** The agents' repositories: one each, or one they share. */
  repos(ctx: ScenarioContext): Pick<AgentSetup, 'sharedRepo' | 'repoPrefix'>;
}

export function writeFleetScenario(fleet: WriteFleet): Scenario {
  return {
    name: fleet.name,
    description: fleet.description,
    variants: [],
    needsServer: true,
    async run(ctx) {
      const n = ctx.settings.agents;
      const base = resultBase(this, null, writeParameters(ctx, n, ctx.settings.openRates));
      const { agents } = await createAgents(ctx, { count: n, ...fleet.repos(ctx), seedFile: null });
      const out = await runWritePhases(ctx, { label: fleet.name, agents, readRatio: 0, readPaths: [], openRates: ctx.settings.openRates });
      const verification = await verifyAgents(ctx, out.agents);
      return finishResult(base, out.phases, verification, { acknowledgedWrites: totalWrites(out.agents), ...serverWriteMetrics(out.phases) });
    },
  };
}
