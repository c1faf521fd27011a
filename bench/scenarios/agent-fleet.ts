/**
 * `agent-fleet`: N agents, each on its own repository and bookmark, each `apply-ops` writing
 * 3 × 2 KiB as a new change on top of its previous change and advancing its bookmark in the same
 * call. Writes to different repositories should scale with worker count.
 */
import { writeFleetScenario } from './write-fleet.js';

export const agentFleet = writeFleetScenario({
  name: 'agent-fleet',
  description: 'apply-ops: N agents, one repository and bookmark each, chained changes',
  repos: (ctx) => ({ sharedRepo: null, repoPrefix: `${ctx.prefix}-fleet` }),
});
