/**
 * Spreading one phase over several generator processes (`--generators N`, like autocannon's
 * `workers`), for machines where one generator process saturates before the server does.
 * Slots (connections, agents) are dealt round-robin, the open-loop rate is divided evenly, and
 * the results are merged back into one, histograms included.
 */
import type { GeneratorJob, GeneratorResult, KindOutcome, WorkloadSpec } from './generator-protocol.js';
import { createHistogram, decodeHistogram, encodeHistogram } from './histogram.js';

function slotCount(w: WorkloadSpec): number {
  return w.kind === 'agents' ? w.agents.length : w.slots;
}

function share(total: number, parts: number, k: number): number {
  return Math.floor(total / parts) + (k < total % parts ? 1 : 0);
}

function splitWorkload(w: WorkloadSpec, parts: number, k: number): WorkloadSpec {
  if (w.kind === 'agents') return { ...w, agents: w.agents.filter((_, i) => i % parts === k) };
  return { ...w, slots: share(w.slots, parts, k) };
}

export function splitJob(job: GeneratorJob, generators: number): GeneratorJob[] {
  const parts = Math.max(1, Math.min(generators, slotCount(job.workload)));
  return Array.from({ length: parts }, (_, k) => ({
    ...job,
    rate: job.rate === null ? null : job.rate / parts,
    workload: splitWorkload(job.workload, parts, k),
  }));
}

function mergeHistograms(encoded: readonly string[]): string {
  const total = createHistogram();
  for (const e of encoded) total.add(decodeHistogram(e));
  return encodeHistogram(total);
}

export function mergeResults(results: readonly GeneratorResult[]): GeneratorResult {
  const [first] = results;
  if (!first) throw new Error('no generator results to merge');
  if (results.length === 1) return first;
  const sum = (f: (r: GeneratorResult) => number): number => results.reduce((a, r) => a + f(r), 0);
  const errorsByStatus: Record<string, number> = {};
  const byKindParts = new Map<string, KindOutcome[]>();
  for (const r of results) {
    for (const [k, v] of Object.entries(r.errorsByStatus)) errorsByStatus[k] = (errorsByStatus[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.byKind)) byKindParts.set(k, [...(byKindParts.get(k) ?? []), v]);
  }
  const byKind: Record<string, KindOutcome> = {};
  for (const [k, parts] of byKindParts) {
    byKind[k] = {
      requests: parts.reduce((a, p) => a + p.requests, 0),
      errors: parts.reduce((a, p) => a + p.errors, 0),
      latency: mergeHistograms(parts.map((p) => p.latency)),
    };
  }
  const agents = results.every((r) => r.agents === null)
    ? null
    : results.flatMap((r) => r.agents ?? []).sort((a, b) => a.index - b.index);
  const service = results.map((r) => r.service).filter((s): s is string => s !== null);
  return {
    mode: first.mode,
    connections: sum((r) => r.connections),
    warmupMs: first.warmupMs,
    // The generators start within milliseconds of each other: the longest window is the window.
    windowMs: Math.max(...results.map((r) => r.windowMs)),
    rate: first.rate === null ? null : sum((r) => r.rate ?? 0),
    requests: sum((r) => r.requests),
    errors: sum((r) => r.errors),
    errorsByStatus,
    errorSamples: results.flatMap((r) => r.errorSamples).slice(0, 5),
    unsent: sum((r) => r.unsent),
    latency: mergeHistograms(results.map((r) => r.latency)),
    service: service.length > 0 ? mergeHistograms(service) : null,
    byKind,
    agents,
    cpu: Math.max(...results.map((r) => r.cpu)),
  };
}
