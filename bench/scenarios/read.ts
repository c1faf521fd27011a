/**
 * `read`: authenticated `GET /v1/{org}/{repo}`.
 * - `reused-token`: one token for every request (the server's verified-token cache hits).
 * - `fresh-token`: the generator signs a new token per request, so every request pays a full
 *   EdDSA verification on the server (and a signature in the generator, which caps the rate).
 */
import type { WorkloadSpec } from '../generator-protocol.js';
import { runPhase } from '../phases.js';
import type { PhaseResult } from '../report-types.js';
import { baseParameters, finishResult, resultBase, skippedResult } from './result.js';
import type { Scenario, ScenarioContext } from './types.js';
import { requireTarget } from './types.js';

export const read: Scenario = {
  name: 'read',
  description: 'authenticated GET /v1/{org}/{repo}',
  variants: ['reused-token', 'fresh-token'],
  needsServer: true,
  async run(ctx, variant) {
    const { target, api } = requireTarget(ctx);
    const s = ctx.settings;
    const tokens = variant === 'fresh-token' ? 'a new token signed per request' : 'one token reused';
    const base = resultBase(this, variant, { ...baseParameters(s), connections: s.connections }, `${this.description}, ${tokens}`);
    if (variant === 'fresh-token' && !ctx.key) {
      return skippedResult(base, 'not available: needs the signing key (--key-file with --url)');
    }
    const repo = `${ctx.prefix}-read-${variant}`;
    await api.expect(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
    const path = api.repoPath(repo);
    // Check once that the request benchmarked is the one intended (not a fast 404).
    await api.expect(200, 'GET', path);

    const workload: WorkloadSpec =
      variant === 'fresh-token' && ctx.key
        ? { kind: 'fresh-token', slots: s.connections, path, key: ctx.key, expectStatus: 200 }
        : {
            kind: 'static',
            slots: s.connections,
            requests: [{ method: 'GET', path, headers: { Authorization: `Bearer ${await ctx.token()}` }, kind: 'read' }],
            expectStatus: 200,
          };
    const phases = await readPhases(ctx, `read ${variant}`, workload);
    return finishResult(base, phases, null);
  },
};

/** Closed loop, then (with --read-open-loop) open loop at the configured fraction of its max. */
export async function readPhases(ctx: ScenarioContext, label: string, workload: WorkloadSpec): Promise<PhaseResult[]> {
  const { target } = requireTarget(ctx);
  const s = ctx.settings;
  const closed = await runPhase(ctx, { label: `${label} closed`, host: target.host, port: target.port, mode: 'closed', workload });
  const phases = [closed.phase];
  if (s.readOpenLoop && closed.phase.throughput > 0) {
    const rate = closed.phase.throughput * s.openFraction;
    const open = await runPhase(ctx, { label: `${label} open`, host: target.host, port: target.port, mode: 'open', rate, workload });
    phases.push(open.phase);
  }
  return phases;
}
