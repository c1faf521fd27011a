/**
 * `scale`: how the cost grows with the size of the work (issue 25 §4). Each variant measures one
 * family of curves, a point per size, and judges it against its target:
 * - `files`: one-file apply-ops, content and diff vs files in the repository (flat, 8 deep);
 * - `repos`: reads, the org's cursor listing and start-up vs repositories in the data directory;
 * - `write-bytes`: bytes and syncs per write on agent-fleet's workload;
 * - `history`: first page of changes and the tip's diff vs changes on the bookmark.
 * `repos` and `write-bytes` start a server of their own (restarts, process counters), so they
 * need the built server and cannot run against `--url`.
 */
import type { Curve, PhaseResult, Verification } from '../report-types.js';
import { targetMetrics } from '../scale-curves.js';
import { serverBuilt } from '../server-process.js';
import { finishResult, resultBase, skippedResult } from './result.js';
import { filesParameters, runScaleFiles } from './scale-files.js';
import { historyParameters, runScaleHistory } from './scale-history.js';
import { reposParameters, runScaleRepos } from './scale-repos.js';
import { runScaleWriteBytes, writeBytesParameters } from './scale-write-bytes.js';
import type { Scenario, ScenarioContext, ScenarioSettings } from './types.js';

/** What a variant measured: its phases (one per point), curves and checks. */
export interface ScaleOutcome {
  phases: PhaseResult[];
  curves: Curve[];
  metrics: Record<string, number>;
  verification: Verification | null;
  problems: string[];
  /** Set-up facts the reader needs (e.g. how syncs were counted), added to the parameters. */
  parameters?: Record<string, string>;
}

interface Variant {
  description: string;
  ownServer: boolean;
  parameters(s: ScenarioSettings): Record<string, string | number>;
  /** A string is the reason the variant is not available. */
  run(ctx: ScenarioContext): Promise<ScaleOutcome | string>;
}

const VARIANTS: Record<string, Variant> = {
  files: {
    description: 'one-file apply-ops, content and diff latency vs files in the repository (flat, 8 levels deep)',
    ownServer: false,
    parameters: filesParameters,
    run: runScaleFiles,
  },
  repos: {
    description: 'GET /{org}/{repo} req/s, cursor listing per page and start-up vs repositories in the data directory',
    ownServer: true,
    parameters: reposParameters,
    run: runScaleRepos,
  },
  'write-bytes': {
    description: 'bytes written and syncs per write on agent-fleet (3 × 2 KiB apply-ops)',
    ownServer: true,
    parameters: writeBytesParameters,
    run: runScaleWriteBytes,
  },
  history: {
    description: 'GET …/changes first page and the tip-to-parent diff vs changes on the bookmark',
    ownServer: false,
    parameters: historyParameters,
    run: runScaleHistory,
  },
};

export const scale: Scenario = {
  name: 'scale',
  description: 'cost as the work grows',
  variants: Object.keys(VARIANTS),
  needsServer: true,
  async run(ctx, variant) {
    const name = variant ?? 'files';
    const v = VARIANTS[name]!;
    const base = resultBase(this, name, v.parameters(ctx.settings), v.description);
    // `--url` runs have no worker count (run.ts): the server is not the bench's to restart.
    if (v.ownServer && ctx.target?.workers === null) return skippedResult(base, 'not available with --url: needs a server the bench starts');
    if (v.ownServer && !serverBuilt()) return skippedResult(base, 'not available: the server is not built (npm run build)');
    const out = await v.run(ctx);
    if (typeof out === 'string') return skippedResult(base, out);
    Object.assign(base.parameters, out.parameters);
    return { ...finishResult(base, out.phases, out.verification, { ...out.metrics, ...targetMetrics(out.curves) }, out.problems), curves: out.curves };
  },
};
