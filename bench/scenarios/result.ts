/** Small builders shared by the scenarios, so every result has the same shape. */
import type { PhaseResult, ScenarioResult, Verification } from '../report-types.js';
import type { ScenarioSettings } from './types.js';

export function baseParameters(s: ScenarioSettings): Record<string, number> {
  return { durationSec: s.durationMs / 1000, warmupSec: s.warmupMs / 1000 };
}

/** Failed when any phase had errors or verification failed; `note` explains the first reason. */
export function finishResult(
  base: Pick<ScenarioResult, 'scenario' | 'variant' | 'description' | 'parameters'>,
  phases: PhaseResult[],
  verification: Verification | null,
  metrics: Record<string, number> = {},
  extraProblems: string[] = [],
): ScenarioResult {
  const problems = [...extraProblems];
  for (const p of phases) {
    if (p.errors > 0) {
      problems.push(`${p.phase} loop: ${p.errors} failed requests ${JSON.stringify(p.errorsByStatus)}`);
    }
  }
  if (verification && !verification.ok) {
    problems.push(`verification failed: ${verification.failures.slice(0, 3).join('; ')}`);
  }
  return {
    ...base,
    status: problems.length === 0 ? 'ok' : 'failed',
    note: problems.length === 0 ? null : problems.join(' | '),
    phases,
    metrics,
    verification,
  };
}

export function failedResult(
  base: Pick<ScenarioResult, 'scenario' | 'variant' | 'description' | 'parameters'>,
  err: unknown,
): ScenarioResult {
  return {
    ...base,
    status: 'failed',
    note: err instanceof Error ? err.message : String(err),
    phases: [],
    metrics: {},
    verification: null,
  };
}

export function skippedResult(
  base: Pick<ScenarioResult, 'scenario' | 'variant' | 'description' | 'parameters'>,
  note: string,
): ScenarioResult {
  return { ...base, status: 'skipped', note, phases: [], metrics: {}, verification: null };
}
