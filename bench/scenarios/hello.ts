/** `hello`: the raw uWS hello-world baseline, in its own process, same generator. */
import { join } from 'node:path';
import { runPhase } from '../phases.js';
import type { PhaseResult } from '../report-types.js';
import { startHelloServer } from '../server-process.js';
import { baseParameters, finishResult, resultBase } from './result.js';
import type { Scenario } from './types.js';

export const hello: Scenario = {
  name: 'hello',
  description: 'raw uWS hello world (separate process): the ceiling of HTTP layer + generator',
  variants: [],
  needsServer: false,
  async run(ctx) {
    const s = ctx.settings;
    const base = resultBase(this, null, { ...baseParameters(s), connections: s.connections });
    const server = await startHelloServer(join(ctx.workDir, 'hello-server.log'));
    try {
      const workload = {
        kind: 'static' as const,
        slots: s.connections,
        requests: [{ method: 'GET' as const, path: '/', headers: {}, kind: 'hello' }],
        expectStatus: 200,
      };
      const phases: PhaseResult[] = [];
      const closed = await runPhase(ctx, { label: 'hello closed', host: server.host, port: server.port, mode: 'closed', workload });
      phases.push(closed.phase);
      if (s.readOpenLoop && closed.phase.throughput > 0) {
        const rate = closed.phase.throughput * s.openFraction;
        const open = await runPhase(ctx, { label: 'hello open', host: server.host, port: server.port, mode: 'open', rate, workload });
        phases.push(open.phase);
      }
      return finishResult(base, phases, null);
    } finally {
      await server.stop();
    }
  },
};
