/**
 * Messages between the orchestrator and the load-generator child process. Everything here is
 * plain data: it crosses a process boundary (IPC, structured clone).
 */
import type { PhaseFailures, PhaseMode } from './report-types.js';
import type { SigningKey } from './tokens.js';

export interface StaticRequestSpec {
  method: 'GET' | 'POST';
  /** Path with query string. */
  path: string;
  headers: Record<string, string>;
  /** Label for per-kind latency (e.g. `raw`, `json`). */
  kind: string;
}

/** Fixed requests, cycled; slot i starts at request i so connections spread over them. */
export interface StaticWorkloadSpec {
  kind: 'static';
  slots: number;
  requests: StaticRequestSpec[];
  expectStatus: number;
}

/** One GET per request with a token signed just before sending. */
export interface FreshTokenWorkloadSpec {
  kind: 'fresh-token';
  slots: number;
  path: string;
  key: SigningKey;
  expectStatus: number;
}

/** An agent: writes a chain of changes on its own bookmark. */
export interface AgentState {
  index: number;
  repo: string;
  bookmark: string;
  /** Last change the server acknowledged (virtual root before the first write). */
  lastChangeId: string;
  /** Acknowledged writes so far; write n carries content for sequence n. */
  writes: number;
  /** Every acknowledged change id, oldest first: verification walks the history against it. */
  chain: string[];
}

/**
 * Agents writing `files` files of `fileBytes` each per apply-ops, on top of their previous change,
 * advancing their bookmark in the same call; with `readRatio` > 0 the same agents also read
 * (the mixed scenario). One agent = one connection = one request at a time, because each write
 * needs the id the previous one returned.
 */
export interface AgentWorkloadSpec {
  kind: 'agents';
  org: string;
  token: string;
  agents: AgentState[];
  files: number;
  fileBytes: number;
  readRatio: number;
  /** Read paths, `{repo}` replaced per agent; cycled. */
  readPaths: string[];
}

export type WorkloadSpec = StaticWorkloadSpec | FreshTokenWorkloadSpec | AgentWorkloadSpec;

export interface GeneratorJob {
  host: string;
  port: number;
  mode: PhaseMode;
  /** Open loop only: arrivals per second. */
  rate: number | null;
  warmupMs: number;
  durationMs: number;
  /** How long to wait after the window for in-flight and queued requests. */
  drainMs: number;
  requestTimeoutMs: number;
  workload: WorkloadSpec;
}

export interface KindOutcome {
  requests: number;
  errors: number;
  latency: string;
}

export interface GeneratorResult extends PhaseFailures {
  mode: PhaseMode;
  connections: number;
  warmupMs: number;
  windowMs: number;
  rate: number | null;
  requests: number;
  /** Encoded HDR histograms (µs). */
  latency: string;
  service: string | null;
  byKind: Record<string, KindOutcome>;
  agents: AgentState[] | null;
  /** CPU time of the generator process over the run, as a fraction of one core. */
  cpu: number;
}

export type ToGenerator = { type: 'run'; job: GeneratorJob } | { type: 'stop' };

export type FromGenerator =
  /** Connections are open and the clock runs (the warm-up starts now). */
  | { type: 'started' }
  | { type: 'progress'; elapsedMs: number; totalMs: number; completed: number; rate: number }
  | { type: 'result'; result: GeneratorResult }
  | { type: 'error'; message: string };

export const ROOT_CHANGE_ID = 'z'.repeat(32);
