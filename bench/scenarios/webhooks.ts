/**
 * `webhooks`: agent-fleet writes with N webhook targets (default 10) subscribed to
 * `change.created` on the agents' repositories, all pointing at a local receiver process.
 * Measures deliveries per second and the lag from event to arrival; verifies that every
 * acknowledged change reached every target (waiting for the outbox to drain).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { summarizeEncoded } from '../histogram.js';
import { round } from '../phases.js';
import type { Verification } from '../report-types.js';
import { ReceiverProcess } from '../receiver-process.js';
import { createAgents, runWritePhases, totalWrites, verifyAgents, writeParameters } from './agent-writes.js';
import { failedResult, finishResult, resultBase } from './result.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

export const webhooks: Scenario = {
  name: 'webhooks',
  description: 'apply-ops writes fanned out to N webhook targets on a local receiver',
  variants: [],
  needsServer: true,
  async run(ctx) {
    const { target, api } = requireTarget(ctx);
    const s = ctx.settings;
    const n = s.agents;
    const base = resultBase(this, null, { ...writeParameters(ctx, n), targets: s.webhookTargets, drainTimeoutSec: s.webhookDrainMs / 1000 });
    const { agents, repoIds } = await createAgents(ctx, { count: n, sharedRepo: null, repoPrefix: `${ctx.prefix}-hook`, seedFile: null });
    const receiver = await ReceiverProcess.start(s.webhookTargets);
    const targetIds: string[] = [];
    try {
      for (let i = 0; i < s.webhookTargets; i++) {
        const created = await api.expect<{ id: string }>(201, 'POST', `/v1/${target.org}/webhook-targets`, {
          name: `bench-${i}`,
          url: `http://127.0.0.1:${receiver.port}/t/${i}`,
          events: ['change.created'],
          repo_ids: repoIds,
        });
        targetIds.push(created.id);
      }
      const writesStart = Date.now();
      const out = await runWritePhases(ctx, { label: 'webhooks', agents, readRatio: 0, readPaths: [] });
      const writesEnd = Date.now();

      // Wait until every target has seen every acknowledged change (or the drain timeout).
      const expected = new Set(out.agents.flatMap((a) => a.chain));
      const deadline = writesEnd + s.webhookDrainMs;
      let snap = await receiver.snapshot(false);
      while (snap.perTarget.some((c) => c < expected.size) && Date.now() < deadline) {
        await sleep(250);
        snap = await receiver.snapshot(false);
      }
      snap = await receiver.snapshot(true);
      const drainSec = snap.lastAt ? Math.max(0, (snap.lastAt - writesEnd) / 1000) : 0;

      const failures: string[] = [];
      snap.changeIds?.forEach((ids, i) => {
        const got = new Set(ids);
        let missing = 0;
        for (const id of expected) if (!got.has(id)) missing++;
        if (missing > 0) failures.push(`target ${i}: ${missing} of ${expected.size} acknowledged changes not delivered`);
      });
      const deliveryCheck: Verification = {
        ok: failures.length === 0,
        method: 'receiver saw a change.created for every acknowledged change on every target',
        checked: expected.size * s.webhookTargets,
        failures,
      };
      const agentCheck = await verifyAgents(ctx, out.agents);
      const verification: Verification = {
        ok: deliveryCheck.ok && agentCheck.ok,
        method: `${agentCheck.method}; ${deliveryCheck.method}`,
        checked: agentCheck.checked + deliveryCheck.checked,
        failures: [...deliveryCheck.failures, ...agentCheck.failures],
      };
      const lag = summarizeEncoded(snap.lag);
      const span = snap.firstAt && snap.lastAt ? Math.max(0.001, (snap.lastAt - writesStart) / 1000) : 0;
      const metrics = {
        acknowledgedWrites: totalWrites(out.agents),
        deliveriesExpected: expected.size * s.webhookTargets,
        deliveriesReceived: snap.received,
        duplicateDeliveries: snap.duplicates,
        deliveriesPerSec: span > 0 ? round(snap.received / span, 1) : 0,
        peakDeliveriesPerSec: Math.max(0, ...snap.perSecond),
        drainAfterWritesSec: round(drainSec, 3),
        lagP50Ms: lag.p50,
        lagP99Ms: lag.p99,
        lagMaxMs: lag.max,
      };
      return finishResult(base, out.phases, verification, metrics);
    } catch (err) {
      return failedResult(base, err);
    } finally {
      // Targets restricted to this scenario's repositories; deleting them keeps later scenarios
      // free of delivery work and retries.
      for (const id of targetIds) {
        await api.call('DELETE', `/v1/${target.org}/webhook-targets/${id}`).catch(() => undefined);
      }
      receiver.stop();
    }
  },
};
