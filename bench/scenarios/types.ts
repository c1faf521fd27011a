/**
 * The contract between the orchestrator and a scenario. A scenario sets up its data through the
 * API, runs one or more generator phases, verifies what it wrote and returns a ScenarioResult;
 * the orchestrator owns processes, tokens and the report.
 */
import type { ApiClient } from '../api-client.js';
import type { ProgressReporter } from '../progress.js';
import type { ScenarioResult } from '../report-types.js';
import type { SigningKey } from '../tokens.js';

/** Resolved numeric settings every scenario reads (all in the report's `options`). */
export interface ScenarioSettings {
  durationMs: number;
  warmupMs: number;
  drainMs: number;
  requestTimeoutMs: number;
  /** Generator processes per phase (slots dealt round-robin between them); wrk threads with `wrk`. */
  generators: number;
  /** Who drives closed-loop GET phases: the Node generator, or wrk (`--generator wrk`). */
  generator: 'node' | 'wrk';
  /** Connections for read scenarios and the hello baseline. */
  connections: number;
  /** Agents for the write scenarios (one connection each). */
  agents: number;
  /** Open-loop rate as a fraction of the closed-loop maximum. */
  openFraction: number;
  /** agent-fleet, hot-repo: fixed open-loop rates (ascending) run instead of `openFraction`. */
  openRates: number[];
  /** Also run an open-loop phase for the read scenarios. */
  readOpenLoop: boolean;
  writeFiles: number;
  writeFileBytes: number;
  contentFiles: number;
  contentFileBytes: number;
  mixedReadRatio: number;
  webhookTargets: number;
  webhookDrainMs: number;
  syncCommits: number;
  syncFilesPerCommit: number;
  syncTimeoutMs: number;
  /** Rounds of the git-clone scenario (each times every operation on both servers). */
  cloneRounds: number;
  /** scale: file counts of the file-count curve; the flat layout stops at `scaleFlatMaxFiles`. */
  scaleFiles: number[];
  scaleFlatMaxFiles: number;
  /** scale: repository counts of the repository-count curve (one data directory, grown in steps). */
  scaleRepos: number[];
  /** scale: history lengths (changes on one bookmark) of the history curve. */
  scaleChanges: number[];
  /** scale: measured and warm-up time of each phase behind a point. */
  scaleDurationMs: number;
  scaleWarmupMs: number;
  /** scale: agents (connections) of the latency curves, a few so that latency is not queueing. */
  scaleAgents: number;
  /** Rounds of the clone-isolation scenario (each runs the writes alone, then beside the clones). */
  isolationRounds: number;
  /**
   * scale: rounds per curve, each measuring every size once in turn; a point is the median of its
   * rounds, so a load that drifts during the run (other work on the machine) hits every size alike.
   */
  scaleRounds: number;
  /** git clients of the git-push scenario, each pushing to its own branch. */
  pushClients: number;
}

/** The server under test. */
export interface Target {
  url: string;
  host: string;
  port: number;
  org: string;
  workers: number | null;
  /** The server's Prometheus text, when the bench started it. */
  metricsUrl: string | null;
}

export interface ScenarioContext {
  settings: ScenarioSettings;
  /** Null only while running scenarios that bring their own server (hello). */
  target: Target | null;
  api: ApiClient | null;
  /** Signing key when known (spawned server, or `--key-file`): needed by `read/fresh-token`. */
  key: SigningKey | null;
  /** A token valid for the next hour (fresh for every call when a key is known). */
  token(): Promise<string>;
  progress: ProgressReporter;
  /** Unique per run: repository names start with it, so reruns on one server never collide. */
  prefix: string;
  /** Scratch directory for the run (logs, git fixtures). */
  workDir: string;
}

export interface Scenario {
  name: string;
  description: string;
  /** Variants run as separate results (`--scenarios read:fresh-token` picks one). */
  variants: readonly string[];
  /** Whether the scenario needs the repohost server (everything but hello). */
  needsServer: boolean;
  run(ctx: ScenarioContext, variant: string | null): Promise<ScenarioResult>;
}

/** The pieces of a scenario's context that must be there when it needs the server. */
export function requireTarget(ctx: ScenarioContext): { target: Target; api: ApiClient } {
  if (!ctx.target || !ctx.api) throw new Error('scenario needs a server but none is running');
  return { target: ctx.target, api: ctx.api };
}
