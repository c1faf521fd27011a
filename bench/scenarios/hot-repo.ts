/**
 * `hot-repo`: the agent-fleet workload with every agent on one repository (each on its own
 * bookmark). All writes go through one repository actor, so this measures the single-writer path:
 * its mailbox, group commit and one flush per batch.
 */
import { writeFleetScenario } from './write-fleet.js';

export const hotRepo = writeFleetScenario({
  name: 'hot-repo',
  description: 'apply-ops: N agents on one repository, one bookmark each',
  repos: (ctx) => ({ sharedRepo: `${ctx.prefix}-hot`, repoPrefix: `${ctx.prefix}-hot` }),
});
