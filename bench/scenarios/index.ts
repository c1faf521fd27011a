/** Every scenario, in the order a full run executes them (baseline first). */
import { agentFleet } from './agent-fleet.js';
import { cloneIsolation } from './clone-isolation.js';
import { content } from './content.js';
import { gitClone } from './git-clone.js';
import { gitPush } from './git-push.js';
import { hello } from './hello.js';
import { hotRepo } from './hot-repo.js';
import { mixed } from './mixed.js';
import { read } from './read.js';
import { scale } from './scale.js';
import { sync } from './sync.js';
import type { Scenario } from './types.js';
import { webhooks } from './webhooks.js';

export const SCENARIOS: readonly Scenario[] = [hello, read, content, agentFleet, hotRepo, mixed, webhooks, sync, gitClone, gitPush, cloneIsolation, scale];

export interface Selection {
  scenario: Scenario;
  variants: Array<string | null>;
}

/**
 * Parses `--scenarios a,b:variant`; `all` (or nothing) selects everything. Unknown names throw
 * with the list of valid ones.
 */
export function selectScenarios(spec: readonly string[]): Selection[] {
  const wanted = spec.length === 0 || spec.includes('all') ? SCENARIOS.map((s) => s.name) : spec;
  const byName = new Map<string, Set<string> | 'all'>();
  for (const item of wanted) {
    const [name = '', variant] = item.split(':');
    const scenario = SCENARIOS.find((s) => s.name === name);
    if (!scenario) {
      throw new Error(`unknown scenario "${name}"; choose from: ${SCENARIOS.map((s) => s.name).join(', ')}`);
    }
    if (variant !== undefined && !scenario.variants.includes(variant)) {
      throw new Error(`scenario "${name}" has no variant "${variant}"; variants: ${scenario.variants.join(', ') || 'none'}`);
    }
    const current = byName.get(name);
    if (variant === undefined || current === 'all') byName.set(name, 'all');
    else byName.set(name, (current ?? new Set<string>()).add(variant));
  }
  return SCENARIOS.filter((s) => byName.has(s.name)).map((scenario) => {
    const chosen = byName.get(scenario.name);
    const variants: Array<string | null> =
      scenario.variants.length === 0 ? [null] : chosen === 'all' ? [...scenario.variants] : scenario.variants.filter((v) => (chosen as Set<string>).has(v));
    return { scenario, variants };
  });
}
