/**
 * Shape of a benchmark report (`bench/results/<timestamp>.json`). The HTML renderer reads only
 * this, so a result file from an older run keeps rendering as long as `schema` matches.
 * All latencies are milliseconds; all rates are per second.
 */

export const REPORT_SCHEMA = 1;

export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** Per request kind (e.g. `read` / `write` in the mixed scenario). */
export interface KindResult {
  requests: number;
  throughput: number;
  errors: number;
  latency: LatencySummary;
}

export type PhaseMode = 'closed' | 'open';

/** A phase's failed requests, as its generators counted them. */
export interface PhaseFailures {
  errors: number;
  errorsByStatus: Record<string, number>;
  /** A few error responses, trimmed, to say why without digging through logs. */
  errorSamples: string[];
  /** Open loop: arrivals still unsent when the drain timeout hit (counted as failures). */
  unsent: number;
}

export interface PhaseResult extends PhaseFailures {
  phase: PhaseMode;
  /** What the phase measured, when a result has several of one mode (the scale curves' points). */
  label?: string;
  /** Concurrent connections (closed loop: each loops send → wait → send). */
  connections: number;
  /** Length of the measured window (after warm-up). */
  durationSec: number;
  warmupSec: number;
  /** Open loop: the fixed arrival rate; null in closed loop. */
  targetRate: number | null;
  /** Requests completed inside the measured window. */
  requests: number;
  throughput: number;
  /**
   * Closed loop: from send to last byte. Open loop: from the *intended* send time, so that a
   * stalled server shows up in the tail instead of silently lowering the send rate.
   */
  latency: LatencySummary;
  /** Open loop only: from the actual send (what a coordinated-omission-prone tool reports). */
  serviceTime: LatencySummary | null;
  byKind: Record<string, KindResult>;
  /**
   * CPU of the (busiest) generator process as a fraction of one core. Near 1 means the
   * generator, not the server, set the pace: read the phase as a lower bound.
   */
  generatorCpu: number;
  /** HDR histogram of `latency` in microseconds, compressed base64 (hdr-histogram-js). */
  histogram: string;
  /** Write phases on a server whose metrics the bench reads: what the server counted (server-counters.ts). */
  server?: ServerWriteFigures;
}

/**
 * A write phase as the server saw it, warm-up included: per actor call (in the write scenarios,
 * nearly all writes) and per mailbox batch.
 */
export interface ServerWriteFigures {
  writesPerBatch: number;
  /**
   * LMDB pages every writer wrote (webhook deliveries and analytics included) per call, and the
   * same in KB (pages × 4 KiB).
   */
  pagesPerWrite: number;
  kbPerWrite: number;
  /** Means per batch: from the drain to the replies (the write lock's wait included), and from the end of its commands. */
  drainToReplyMsPerBatch: number;
  commandsToReplyMsPerBatch: number;
  /** LMDB's write-lock wait and sync time (every writer's) over the phase, per batch. */
  lockWaitMsPerBatch: number;
  syncMsPerBatch: number;
}

export interface Verification {
  ok: boolean;
  method: string;
  checked: number;
  failures: string[];
}

export type ScenarioStatus = 'ok' | 'failed' | 'skipped';

export interface ScenarioResult {
  scenario: string;
  variant: string | null;
  description: string;
  status: ScenarioStatus;
  note: string | null;
  parameters: Record<string, string | number | boolean>;
  phases: PhaseResult[];
  /** Scenario-specific figures (e.g. webhook deliveries/s, sync seconds). */
  metrics: Record<string, number>;
  verification: Verification | null;
  /** Figures against the size of the work (the scale family); each is drawn as its own chart. */
  curves?: Curve[];
}

/** One measured point: the size of the work and the figure at that size. */
export interface CurvePoint {
  size: number;
  value: number;
}

export interface CurveSeries {
  label: string;
  points: CurvePoint[];
}

/**
 * How a curve is judged: `growth` = value at the largest size ÷ value at the smallest ≤ limit;
 * `spread` = largest value ÷ smallest value over all sizes ≤ limit; `ceiling` = every value ≤ limit.
 */
export type CurveTargetKind = 'growth' | 'spread' | 'ceiling';

export interface CurveTargetOutcome {
  series: string;
  /** The ratio (growth, spread) or the largest value (ceiling); null with fewer than two sizes. */
  value: number | null;
  met: boolean | null;
}

export interface CurveTarget {
  /** The target in words, with the sizes it was stated for. */
  text: string;
  kind: CurveTargetKind;
  limit: number;
  /** One per judged series (the others are drawn and tabled but not judged). */
  outcomes: CurveTargetOutcome[];
  /** Every judged series met it; null when none could be judged. */
  met: boolean | null;
}

export interface Curve {
  id: string;
  title: string;
  /** What the x axis counts (files, repositories, changes, writes/s). */
  sizeLabel: string;
  /** Unit of the values; `req/s` curves are also shown as a fraction of hello. */
  unit: string;
  series: CurveSeries[];
  target: CurveTarget | null;
}

export interface WorkerRun {
  /** Server worker count (per node in a cluster); null when targeting an external server (`--url`). */
  workers: number | null;
  /** Set when the server under test was a local cluster (`--cluster N`). */
  cluster?: ClusterRunInfo;
  results: ScenarioResult[];
}

/** Sequential GETs of one repository through its owner and through a node forwarding to it. */
export interface HopLatency {
  requests: number;
  owner: string;
  via: string;
  direct: LatencySummary;
  forwarded: LatencySummary;
}

export interface ClusterRunInfo {
  nodes: number;
  shardLog: 'etcd' | 'jetstream';
  /** Where the generators sent their requests (`n1`: one node; the others' shards are forwarded). */
  entry: string;
  hop: HopLatency | null;
}

/** A cluster phase beside the same phase on the single node of the run: cluster ÷ single. */
export interface ClusterRatioRow {
  scenario: string;
  variant: string | null;
  phase: PhaseMode;
  label?: string;
  throughput: number | null;
  p50: number | null;
  p99: number | null;
}

export interface ClusterComparison {
  nodes: number;
  shardLog: 'etcd' | 'jetstream';
  entry: string;
  rows: ClusterRatioRow[];
  /** Forwarded ÷ direct p50 and the added milliseconds of one hop (p50). */
  hop: { ratioP50: number | null; addedP50Ms: number; addedP99Ms: number } | null;
}

export interface ComparisonRow {
  scenario: string;
  variant: string | null;
  phase: PhaseMode;
  /** The phase's label, when its result has several phases of one mode. */
  label?: string;
  /** Keyed by worker count (`cluster N` for a cluster run). */
  throughput: Record<string, number>;
  p99: Record<string, number>;
}

export interface MachineInfo {
  cpus: number;
  model: string;
  memoryBytes: number;
  platform: string;
  arch: string;
  release: string;
  loadAverageAtStart: number[];
}

export interface MethodInfo {
  generator: string;
  connectionReuse: string;
  closedLoop: string;
  openLoop: string;
  histogram: string;
  placement: string;
}

export interface BenchReport {
  schema: typeof REPORT_SCHEMA;
  date: string;
  wallTimeSec: number;
  machine: MachineInfo;
  node: { version: string; v8: string };
  gitCommit: string | null;
  method: MethodInfo;
  target: { kind: 'spawned' | 'external'; url: string | null };
  /** Every option the run used, defaults included, so two runs can be compared. */
  options: Record<string, string | number | boolean | number[] | string[] | null>;
  /** The raw uWS hello-world baseline, measured in the same run. */
  baseline: ScenarioResult[];
  runs: WorkerRun[];
  comparison: ComparisonRow[];
  /** With `--cluster N`: the cluster run against the single node of the same run. */
  cluster?: ClusterComparison;
  ok: boolean;
}
