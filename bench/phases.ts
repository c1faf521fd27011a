/**
 * Runs one generator phase (one or `--generators` processes) with a progress bar and turns the
 * raw result into the report's PhaseResult.
 */
import type { GeneratorJob, GeneratorResult, WorkloadSpec } from './generator-protocol.js';
import { mergeResults, splitJob } from './generator-split.js';
import { summarizeEncoded } from './histogram.js';
import { startGenerator } from './load-client.js';
import type { GeneratorRun, ProgressUpdate } from './load-client.js';
import type { KindResult, PhaseMode, PhaseResult } from './report-types.js';
import type { ScenarioContext } from './scenarios/types.js';
import { startWrk, wrkCanRun } from './wrk-generator.js';

export interface PhaseRequest {
  label: string;
  host: string;
  port: number;
  mode: PhaseMode;
  rate?: number;
  /** Overrides the run's `--duration` (the sync scenario runs until the sync ends). */
  durationMs?: number;
  warmupMs?: number;
  workload: WorkloadSpec;
}

export interface PhaseOutcome {
  phase: PhaseResult;
  raw: GeneratorResult;
}

export interface RunningPhase {
  /** Resolves when every generator's clock runs (the warm-up has begun). */
  started: Promise<void>;
  /** Ends the window early (the generator then drains and reports). */
  stop(): void;
  outcome: Promise<PhaseOutcome>;
}

export function startPhase(ctx: ScenarioContext, req: PhaseRequest): RunningPhase {
  const s = ctx.settings;
  const job: GeneratorJob = {
    host: req.host,
    port: req.port,
    mode: req.mode,
    rate: req.mode === 'open' ? (req.rate ?? null) : null,
    warmupMs: req.warmupMs ?? s.warmupMs,
    durationMs: req.durationMs ?? s.durationMs,
    drainMs: s.drainMs,
    requestTimeoutMs: s.requestTimeoutMs,
    workload: req.workload,
  };
  const bar = ctx.progress.phase(req.label);
  const jobs = s.generator === 'wrk' && wrkCanRun(job) ? [job] : splitJob(job, s.generators);
  const latest = jobs.map(() => ({ elapsedMs: 0, totalMs: 0, completed: 0, rate: 0 }));
  const runs: GeneratorRun[] = jobs.map((j, k) => {
    const onProgress = (p: ProgressUpdate): void => {
      latest[k] = p;
      bar.update({
        elapsedMs: Math.max(...latest.map((l) => l.elapsedMs)),
        totalMs: p.totalMs,
        completed: latest.reduce((a, l) => a + l.completed, 0),
        rate: latest.reduce((a, l) => a + l.rate, 0),
      });
    };
    // wrk's threads take the place of generator processes.
    return s.generator === 'wrk' && wrkCanRun(j) ? startWrk(j, s.generators, onProgress) : startGenerator(j, onProgress);
  });
  const merged = Promise.all(runs.map((r) => r.result)).then(mergeResults, (err: unknown) => {
    // One generator failed: the phase is lost, do not let the others load the server on.
    for (const r of runs) r.stop();
    throw err;
  });
  const outcome = merged.then(
    (raw) => {
      const phase = toPhaseResult(raw);
      bar.done(
        `${Math.round(phase.throughput).toLocaleString('en-US')} req/s, p99 ${phase.latency.p99} ms` +
          (phase.errors > 0 ? `, ${phase.errors} errors ${JSON.stringify(phase.errorsByStatus)}` : ''),
      );
      return { phase, raw };
    },
    (err: unknown) => {
      bar.done(`failed: ${err instanceof Error ? err.message : String(err)}`);
      throw err;
    },
  );
  return {
    started: Promise.all(runs.map((r) => r.started)).then(() => undefined),
    stop: () => runs.forEach((r) => r.stop()),
    outcome,
  };
}

export function runPhase(ctx: ScenarioContext, req: PhaseRequest): Promise<PhaseOutcome> {
  return startPhase(ctx, req).outcome;
}

export function toPhaseResult(raw: GeneratorResult): PhaseResult {
  const windowSec = raw.windowMs / 1000;
  const byKind: Record<string, KindResult> = {};
  for (const [kind, k] of Object.entries(raw.byKind)) {
    byKind[kind] = {
      requests: k.requests,
      throughput: k.requests / windowSec,
      errors: k.errors,
      latency: summarizeEncoded(k.latency),
    };
  }
  return {
    phase: raw.mode,
    connections: raw.connections,
    durationSec: round(windowSec, 3),
    warmupSec: raw.warmupMs / 1000,
    targetRate: raw.rate === null ? null : round(raw.rate, 1),
    requests: raw.requests,
    throughput: round(raw.requests / windowSec, 1),
    errors: raw.errors,
    errorsByStatus: raw.errorsByStatus,
    errorSamples: raw.errorSamples,
    unsent: raw.unsent,
    latency: summarizeEncoded(raw.latency),
    serviceTime: raw.service ? summarizeEncoded(raw.service) : null,
    byKind,
    generatorCpu: round(raw.cpu, 2),
    histogram: raw.latency,
  };
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
