/** Command-line options of `npm run bench` (run.ts), with defaults and the `--smoke` preset. */
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { ScenarioSettings } from './scenarios/types.js';
import { wrkInstalled } from './wrk-generator.js';

export const HELP = `Usage: npm run bench -- [options]

Scenarios (default: all): --scenarios hello,read,content,agent-fleet,hot-repo,mixed,webhooks,sync,git-clone,git-push,clone-isolation,scale
  A variant alone: --scenarios read:fresh-token,content:raw,scale:files

Server:
  (default)            start dist/src/cli/main.js serve on a temporary data directory
  --workers N          server worker threads (default: CPU count)
  --sweep-workers L    restart the server for each worker count, e.g. 1,2,4, and compare
  --url URL --token T  use a running server instead (org = the token's iss)
  --key-file F         with --url: the \`key create --json\` output, for fresh tokens
  --cluster N          also run against a local N-node cluster (3 etcd members, 3 nats-servers,
                       N nodes, each with --workers) and report it against the single node;
                       the generators enter through node n1 (default scenarios: agent-fleet,
                       hot-repo, read)
  --shard-log L        with --cluster: jetstream (default) or etcd

Load:
  --duration S         measured seconds per phase (default 10)
  --warmup S           unmeasured seconds before each phase (default 2)
  --connections N      connections for hello/read/content (default 64)
  --generators N       load-generator processes per phase (default 1; more on big machines)
  --generator G        node (default) or wrk: wrk (when installed) drives the closed-loop GET
                       phases (hello, read, content), so the generator is not their bottleneck
  --agents N           agents for the write scenarios, one connection each (default 200)
  --open-fraction F    open-loop rate as a fraction of the closed-loop max (default 0.8)
  --open-rates L       agent-fleet and hot-repo: open loops at these fixed rates instead, one
                       phase per rate in apply-ops/s, e.g. 500,1000 (labelled "1000/s")
  --read-open-loop     also run an open-loop phase for hello/read/content
  --webhook-targets N  webhook targets (default 10)
  --sync-commits N     commits in the upstream repository for sync and git-clone (default 2000)
  --clone-rounds N     git-clone: rounds, each timing every operation on both servers (default 5)
  --isolation-rounds N clone-isolation: rounds of writes alone, then beside the clones (default 6)
  --push-clients N     git-push: git clients pushing at once, each to its own branch (default 50)
  --smoke              tiny and short: 1 s phases, 4 agents, 8 connections (the tests use it)

Scale (cost as the work grows; variants files, repos, write-bytes, history):
  --scale-max          the largest sizes too: files up to 1,000,000 (flat up to 100,000),
                       repositories 1k/100k/1M, histories of 100 and 100,000 changes (hours)
  --scale-files L      file counts (default 1000,10000,100000); the flat layout stops at 10,000
                       (100,000 with --scale-max): one write there rewrites an n-entry directory
  --scale-repos L      repository counts (default 1000,10000)
  --scale-changes L    history lengths (default 100,10000)
  --scale-duration S   measured seconds per phase (default 3; warm-up 1)
  --scale-rounds N     rounds, each measuring every size once in turn; a point is the median
                       of its rounds (default 3)

Output:
  --out-dir DIR        where <timestamp>.json goes (default bench/results)
  --no-progress        no progress bars
  --keep-data          keep the temporary directory (server data, logs)
`;

/** What a cluster changes: writes (replicated before the reply) and reads (forwarded). */
const CLUSTER_SCENARIOS = 'agent-fleet,hot-repo,read';

export interface BenchOptions {
  scenarios: string[];
  workers: number;
  sweepWorkers: number[] | null;
  url: string | null;
  token: string | null;
  keyFile: string | null;
  /** Nodes of the cluster run (`--cluster N`); null for none. */
  cluster: number | null;
  shardLog: 'etcd' | 'jetstream';
  outDir: string | null;
  progress: boolean;
  keepData: boolean;
  smoke: boolean;
  help: boolean;
  settings: ScenarioSettings;
}

function positiveNumber(name: string, raw: string | undefined, fallback: number, integer = true): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
    throw new Error(`--${name} expects a ${integer ? 'non-negative integer' : 'non-negative number'}, got "${raw}"`);
  }
  return n;
}

/** A comma list of sizes ≥ 1, ascending and without repeats. */
function sizeList(name: string, raw: string | undefined, fallback: number[]): number[] {
  if (raw === undefined) return fallback;
  const sizes = raw.split(',').map((v) => positiveNumber(name, v.trim(), 0));
  if (sizes.length === 0 || sizes.some((n) => n < 1)) throw new Error(`--${name} expects sizes ≥ 1, e.g. 1000,10000`);
  return [...new Set(sizes)].sort((a, b) => a - b);
}

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      scenarios: { type: 'string' },
      workers: { type: 'string' },
      'sweep-workers': { type: 'string' },
      cluster: { type: 'string' },
      'shard-log': { type: 'string' },
      url: { type: 'string' },
      token: { type: 'string' },
      'key-file': { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      generators: { type: 'string' },
      generator: { type: 'string' },
      agents: { type: 'string' },
      'open-fraction': { type: 'string' },
      'open-rates': { type: 'string' },
      'read-open-loop': { type: 'boolean' },
      'webhook-targets': { type: 'string' },
      'sync-commits': { type: 'string' },
      'clone-rounds': { type: 'string' },
      'scale-max': { type: 'boolean' },
      'scale-files': { type: 'string' },
      'scale-repos': { type: 'string' },
      'scale-changes': { type: 'string' },
      'scale-duration': { type: 'string' },
      'isolation-rounds': { type: 'string' },
      'scale-rounds': { type: 'string' },
      'push-clients': { type: 'string' },
      'out-dir': { type: 'string' },
      'no-progress': { type: 'boolean' },
      'keep-data': { type: 'boolean' },
      smoke: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const smoke = values.smoke === true;
  // The smoke preset exists so the bench cannot rot: every code path, about a second each.
  const d = smoke
    ? { duration: 1, warmup: 0.2, connections: 8, agents: 4, targets: 2, syncCommits: 50, drainMs: 10_000, hookDrainMs: 30_000, syncTimeoutMs: 60_000, cloneRounds: 1, isolationRounds: 1, pushClients: 2 }
    : { duration: 10, warmup: 2, connections: 64, agents: 200, targets: 10, syncCommits: 2000, drainMs: 15_000, hookDrainMs: 120_000, syncTimeoutMs: 600_000, cloneRounds: 5, isolationRounds: 6, pushClients: 50 };

  const openFraction = positiveNumber('open-fraction', values['open-fraction'], 0.8, false);
  if (openFraction <= 0 || openFraction > 1) throw new Error('--open-fraction must be in (0, 1]');
  const sweep = values['sweep-workers']
    ? values['sweep-workers'].split(',').map((w) => positiveNumber('sweep-workers', w.trim(), 1))
    : null;
  if (sweep?.some((w) => w < 1)) throw new Error('--sweep-workers needs counts ≥ 1');
  if (values.url && !values.token) throw new Error('--url needs --token');
  if (values.url && sweep) throw new Error('--sweep-workers restarts the server: it cannot be used with --url');
  const cluster = values.cluster === undefined ? null : positiveNumber('cluster', values.cluster, 3);
  if (cluster !== null && cluster < 2) throw new Error('--cluster needs 2 nodes or more');
  if (cluster !== null && (values.url || sweep)) throw new Error('--cluster starts its own servers: it cannot be used with --url or --sweep-workers');
  const shardLog = values['shard-log'] ?? 'jetstream';
  if (shardLog !== 'jetstream' && shardLog !== 'etcd') throw new Error(`--shard-log must be jetstream or etcd, not ${shardLog}`);
  if (values['shard-log'] !== undefined && cluster === null) throw new Error('--shard-log needs --cluster');

  const max = values['scale-max'] === true;
  const scale = smoke
    ? { files: [50, 200], flatMax: 50, repos: [50, 200], changes: [10, 50], duration: 0.5, warmup: 0.2, agents: 2, rounds: 1 }
    : max
      ? { files: [1000, 10_000, 100_000, 1_000_000], flatMax: 100_000, repos: [1000, 100_000, 1_000_000], changes: [100, 100_000], duration: 3, warmup: 1, agents: 4, rounds: 3 }
      : { files: [1000, 10_000, 100_000], flatMax: 10_000, repos: [1000, 10_000], changes: [100, 10_000], duration: 3, warmup: 1, agents: 4, rounds: 3 };

  const settings: ScenarioSettings = {
    durationMs: positiveNumber('duration', values.duration, d.duration, false) * 1000,
    warmupMs: positiveNumber('warmup', values.warmup, d.warmup, false) * 1000,
    drainMs: d.drainMs,
    requestTimeoutMs: 30_000,
    generators: Math.max(1, positiveNumber('generators', values.generators, 1)),
    generator: generatorOption(values.generator),
    connections: Math.max(1, positiveNumber('connections', values.connections, d.connections)),
    agents: Math.max(1, positiveNumber('agents', values.agents, d.agents)),
    openFraction,
    openRates: sizeList('open-rates', values['open-rates'], []),
    readOpenLoop: values['read-open-loop'] === true,
    writeFiles: 3,
    writeFileBytes: 2048,
    contentFiles: 16,
    contentFileBytes: 4096,
    mixedReadRatio: 0.9,
    webhookTargets: Math.max(1, positiveNumber('webhook-targets', values['webhook-targets'], d.targets)),
    webhookDrainMs: d.hookDrainMs,
    syncCommits: Math.max(1, positiveNumber('sync-commits', values['sync-commits'], d.syncCommits)),
    syncFilesPerCommit: 4,
    syncTimeoutMs: d.syncTimeoutMs,
    cloneRounds: Math.max(1, positiveNumber('clone-rounds', values['clone-rounds'], d.cloneRounds)),
    scaleFiles: sizeList('scale-files', values['scale-files'], scale.files),
    scaleFlatMaxFiles: scale.flatMax,
    scaleRepos: sizeList('scale-repos', values['scale-repos'], scale.repos),
    scaleChanges: sizeList('scale-changes', values['scale-changes'], scale.changes),
    scaleDurationMs: positiveNumber('scale-duration', values['scale-duration'], scale.duration, false) * 1000,
    scaleWarmupMs: scale.warmup * 1000,
    scaleAgents: scale.agents,
    isolationRounds: Math.max(1, positiveNumber('isolation-rounds', values['isolation-rounds'], d.isolationRounds)),
    scaleRounds: Math.max(1, positiveNumber('scale-rounds', values['scale-rounds'], scale.rounds)),
    pushClients: Math.max(1, positiveNumber('push-clients', values['push-clients'], d.pushClients)),
  };
  return {
    scenarios: (values.scenarios ?? (cluster === null ? 'all' : CLUSTER_SCENARIOS)).split(',').map((s) => s.trim()).filter(Boolean),
    workers: Math.max(1, positiveNumber('workers', values.workers, availableParallelism())),
    sweepWorkers: sweep,
    url: values.url ?? null,
    token: values.token ?? null,
    keyFile: values['key-file'] ?? null,
    cluster,
    shardLog,
    outDir: values['out-dir'] ?? null,
    progress: values['no-progress'] !== true,
    keepData: values['keep-data'] === true,
    smoke,
    help: values.help === true,
    settings,
  };
}

function generatorOption(value: string | undefined): 'node' | 'wrk' {
  if (value === undefined || value === 'node') return 'node';
  if (value !== 'wrk') throw new Error(`--generator must be node or wrk, not ${value}`);
  if (!wrkInstalled()) throw new Error('--generator wrk: wrk is not installed (apt-get install wrk)');
  return 'wrk';
}

/** The options as recorded in the report (flat, JSON-friendly). */
export function optionsForReport(o: BenchOptions): Record<string, string | number | boolean | number[] | string[] | null> {
  return {
    scenarios: o.scenarios,
    workers: o.url ? null : o.workers,
    sweepWorkers: o.sweepWorkers,
    url: o.url,
    cluster: o.cluster,
    shardLog: o.cluster === null ? null : o.shardLog,
    smoke: o.smoke,
    ...o.settings,
  };
}
