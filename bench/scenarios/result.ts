/** Small builders shared by the scenarios, so every result has the same shape. */
import type { PhaseResult, ScenarioResult, Verification } from '../report-types.js';
import type { Scenario, ScenarioSettings } from './types.js';

/** What names a result and says what it measured, before its outcome is known. */
export type ResultBase = Pick<ScenarioResult, 'scenario' | 'variant' | 'description' | 'parameters'>;

/** The base of a result of `scenario`, under its own name (and description unless one is given). */
export function resultBase(
  scenario: Pick<Scenario, 'name' | 'description'>,
  variant: string | null,
  parameters: ResultBase['parameters'],
  description = scenario.description,
): ResultBase {
  return { scenario: scenario.name, variant, description, parameters };
}

export function baseParameters(s: ScenarioSettings): Record<string, number> {
  return { durationSec: s.durationMs / 1000, warmupSec: s.warmupMs / 1000 };
}

/** Failed when any phase had errors or verification failed; `note` explains the first reason. */
export function finishResult(
  base: ResultBase,
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
  base: ResultBase,
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
  base: ResultBase,
  note: string,
): ScenarioResult {
  return { ...base, status: 'skipped', note, phases: [], metrics: {}, verification: null };
}
