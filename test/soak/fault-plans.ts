import type { GitFault } from '../helpers/git-server.js';
import type { Behaviour } from '../helpers/webhook-receiver.js';

/**
 * How the soak's webhook receiver and upstream misbehave. Each goes through a fixed cycle of
 * answers, request by request, while the load runs and — so that every fault happens even on a
 * machine too slow for many requests during the load — until it has been through its cycle once;
 * then it behaves. A cycle spreads its faults among good answers, so one delivery or one sync
 * never meets enough of them in a row to exhaust its retries.
 */
export type Misstep = 'ok' | 'hang' | 'reset' | 'error' | 'busy' | 'slow';

/** 24 answers: the given missteps at every third place, 200s between them. */
export function receiverCycle(...missteps: Misstep[]): Misstep[] {
  return Array.from({ length: 24 }, (_, i) => (i % 3 === 1 ? (missteps[(i - 1) / 3] ?? 'ok') : 'ok'));
}

/** A receiver path's behaviour (`WebhookReceiver.behave`); `served` counts the missteps answered. */
export function misbehavingReceiver(loadRunning: () => boolean, cycle: Misstep[], served: Map<string, number>): () => Behaviour {
  let k = 0;
  return () => {
    if (!loadRunning() && k >= cycle.length) return { status: 200 };
    const step = cycle[k++ % cycle.length]!;
    if (step !== 'ok') served.set(step, (served.get(step) ?? 0) + 1);
    switch (step) {
      case 'hang':
      case 'reset':
        return step;
      case 'error':
        return { status: 500 };
      case 'busy':
        return { status: 429, headers: { 'retry-after': '1' } };
      case 'slow':
        return { status: 200, delayMs: 200 + Math.random() * 2500 };
      default:
        return { status: 200 };
    }
  };
}

const UPSTREAM_CYCLE: Array<GitFault['kind'] | null> = [null, 'reset', null, 'garbage', 'unavailable', null, 'truncate', null, 'unavailable', null];

/** The upstream's faults (`GitServer.misbehave`), a third of its requests also slowed by up to 0.8 s. */
export function misbehavingUpstream(loadRunning: () => boolean, served: Map<string, number>): () => GitFault | null {
  let k = 0;
  return () => {
    if (!loadRunning() && k >= UPSTREAM_CYCLE.length) return null;
    const kind = UPSTREAM_CYCLE[k++ % UPSTREAM_CYCLE.length] ?? undefined;
    if (kind) served.set(kind, (served.get(kind) ?? 0) + 1);
    return { kind, delayMs: Math.random() < 0.3 ? Math.random() * 800 : 0 };
  };
}

/** `kind×count` pairs for the report. */
export function tallyOf(served: Map<string, number>): string {
  return [...served].map(([kind, n]) => `${kind}×${n}`).join(' ');
}
