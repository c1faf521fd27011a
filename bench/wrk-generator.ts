/**
 * A closed-loop read phase driven by wrk (`--generator wrk`), a C generator that does not
 * saturate before the server: the Node generator tops out near the uWS hello world's pace on this
 * machine, so read ratios measured with it are bounded by the generator. Fixed GET requests and
 * `read/fresh-token` in closed loop can be driven by wrk; every other phase keeps the Node
 * generator. A fresh-token phase's tokens are signed before each wrk run (one new token per
 * request, as the Node generator sends them, without its signing on the machine's cores meanwhile).
 *
 * wrk has no warm-up: a first run of the warm-up length is discarded. Its Lua `done` hook prints
 * the measured run's counts and 1,000 latency percentiles, from which an HDR histogram is rebuilt
 * so the phase lands in the report like any other.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FreshTokenWorkloadSpec, GeneratorJob, GeneratorResult, StaticWorkloadSpec } from './generator-protocol.js';
import { createHistogram, encodeHistogram } from './histogram.js';
import { createSigner, type TokenSigner } from './tokens.js';
import type { GeneratorRun, ProgressUpdate } from './load-client.js';
import { processCpuSeconds } from './process-io.js';

const RESULT_MARK = 'WRK-RESULT ';
/** Percentile steps printed by the script: 0.1 % each, enough to rebuild p99.9 to a step. */
const STEPS = 1000;
const CPU_SAMPLE_MS = 200;
/**
 * Tokens signed per second of a fresh-token run: above what two cores can verify (~18k/s), so a
 * run does not run out. One that does sends the rest without a token, and its 401s show it.
 */
const FRESH_TOKENS_PER_S = 25_000;

type WrkWorkload = StaticWorkloadSpec | FreshTokenWorkloadSpec;

export function wrkInstalled(): boolean {
  return spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
}

/** Whether wrk can drive this job: fixed GETs or fresh-token reads, closed loop. */
export function wrkCanRun(job: GeneratorJob): job is GeneratorJob & { workload: WrkWorkload } {
  if (job.mode !== 'closed') return false;
  return job.workload.kind === 'fresh-token' || (job.workload.kind === 'static' && job.workload.requests.every((r) => r.method === 'GET'));
}

/** A Lua string literal; request parts are printable ASCII (paths, tokens, media types). */
function lua(value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new Error(`wrk: not printable ASCII: ${JSON.stringify(value)}`);
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * Each wrk thread reads its share of the run's token file (its first argument; the thread count is
 * the second) and sends each token once.
 */
function freshTokenRequests(workload: FreshTokenWorkloadSpec): string {
  return `local path = ${lua(workload.path)}
local next_id, tokens, used = 0, {}, 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end
function init(args)
  local threads, line_no = tonumber(args[2]), 0
  for line in io.lines(args[1]) do
    if line_no % threads == id then tokens[#tokens + 1] = "Bearer " .. line end
    line_no = line_no + 1
  end
end
function request()
  used = used + 1
  local token = tokens[used]
  if token == nil then return wrk.format("GET", path) end
  return wrk.format("GET", path, { Authorization = token })
end
`;
}

function script(workload: WrkWorkload): string {
  if (workload.kind === 'fresh-token') return `${freshTokenRequests(workload)}${doneHook()}`;
  const headers = (h: Record<string, string>): string => `{ ${Object.entries(h).map(([k, v]) => `[${lua(k)}] = ${lua(v)}`).join(', ')} }`;
  const [only, ...more] = workload.requests;
  if (!only) throw new Error('wrk: the workload has no request');
  // One request: wrk's own fast path (no Lua call per request). Several: cycled per thread.
  const requests =
    more.length === 0
      ? `wrk.path = ${lua(only.path)}\nwrk.headers = ${headers(only.headers)}\n`
      : `local specs = { ${workload.requests.map((r) => `{ ${lua(r.path)}, ${headers(r.headers)} }`).join(', ')} }
local built, next_index = {}, 0
function init(args)
  for i, s in ipairs(specs) do built[i] = wrk.format("GET", s[1], s[2]) end
end
function request()
  next_index = next_index % #built + 1
  return built[next_index]
end
`;
  return `${requests}${doneHook()}`;
}

function doneHook(): string {
  return `
function done(summary, latency, requests)
  local e = summary.errors
  local values = {}
  for i = 1, ${STEPS} do values[i] = latency:percentile(i * 100 / ${STEPS}) end
  io.write(string.format('${RESULT_MARK}{"durationUs":%d,"requests":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"percentilesUs":[%s]}\\n',
    summary.duration, summary.requests, e.connect, e.read, e.write, e.status, e.timeout, table.concat(values, ",")))
end
`;
}

interface WrkOutcome {
  durationUs: number;
  requests: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  percentilesUs: number[];
}

interface WrkProcess {
  done: Promise<{ outcome: WrkOutcome; cpuSec: number }>;
  stop(): void;
}

function runWrk(args: string[]): WrkProcess {
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  // wrk's CPU, sampled while it runs (/proc is gone once it exits): the last sample is close.
  let cpuSec = 0;
  const sampler = setInterval(() => {
    if (child.pid !== undefined) void processCpuSeconds(child.pid).then((s) => (cpuSec = Number.isNaN(s) ? cpuSec : s));
  }, CPU_SAMPLE_MS);
  const done = new Promise<{ outcome: WrkOutcome; cpuSec: number }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(sampler);
      const line = out.split('\n').find((l) => l.startsWith(RESULT_MARK));
      if (!line) return reject(new Error(`wrk exited ${code} without a result: ${(err || out).trim().slice(0, 500)}`));
      resolve({ outcome: JSON.parse(line.slice(RESULT_MARK.length)) as WrkOutcome, cpuSec });
    });
  });
  // wrk ends its run early and still reports on SIGINT.
  return { done, stop: () => child.kill('SIGINT') };
}

function toResult(job: GeneratorJob, outcome: WrkOutcome, cpuSec: number, kind: string): GeneratorResult {
  const histogram = createHistogram();
  // Each 0.1 % step stands for a thousandth of the requests, at that step's latency.
  let recorded = 0;
  outcome.percentilesUs.forEach((us, i) => {
    const upTo = Math.round((outcome.requests * (i + 1)) / outcome.percentilesUs.length);
    if (upTo > recorded) histogram.recordValueWithCount(Math.max(1, us), upTo - recorded);
    recorded = upTo;
  });
  const latency = encodeHistogram(histogram);
  const transport = outcome.connect + outcome.read + outcome.write + outcome.timeout;
  const errorsByStatus: Record<string, number> = {};
  // wrk counts answers outside 2xx/3xx, not each status.
  if (outcome.status > 0) errorsByStatus['not 2xx/3xx'] = outcome.status;
  if (transport > 0) errorsByStatus.transport = transport;
  const windowMs = outcome.durationUs / 1000;
  return {
    mode: 'closed',
    connections: job.workload.kind === 'agents' ? 0 : job.workload.slots,
    warmupMs: job.warmupMs,
    windowMs,
    rate: null,
    requests: outcome.requests,
    errors: outcome.status + transport,
    errorsByStatus,
    errorSamples: [],
    unsent: 0,
    latency,
    service: null,
    byKind: { [kind]: { requests: outcome.requests, errors: outcome.status + transport, latency } },
    agents: null,
    cpu: windowMs > 0 ? cpuSec / (windowMs / 1000) : 0,
  };
}

/** Signs `count` tokens into `file`, one per line. */
async function writeTokens(file: string, sign: TokenSigner, count: number): Promise<void> {
  const out = createWriteStream(file);
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    lines.push(await sign());
    if (lines.length === 1000 || i === count - 1) {
      if (!out.write(`${lines.join('\n')}\n`)) await once(out, 'drain');
      lines.length = 0;
    }
  }
  out.end();
  await once(out, 'finish');
}

/**
 * Starts a wrk phase with the same surface as a Node generator run. `threads` wrk threads (the
 * `--generators` count) share the connections.
 */
export function startWrk(job: GeneratorJob & { workload: WrkWorkload }, threads: number, onProgress: (p: ProgressUpdate) => void): GeneratorRun {
  const connections = Math.max(job.workload.slots, threads);
  const url = `http://${job.host}:${job.port}`;
  const seconds = (ms: number): string => `${Math.max(1, Math.round(ms / 1000))}s`;
  const timeout = seconds(job.requestTimeoutMs);
  const totalMs = job.warmupMs + job.durationMs;
  let current: WrkProcess | null = null;
  let stopped = false;
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const begun = performance.now();
  const ticker = setInterval(() => onProgress({ elapsedMs: performance.now() - begun, totalMs, completed: 0, rate: 0 }), 500);
  const result = (async (): Promise<GeneratorResult> => {
    const dir = await mkdtemp(join(tmpdir(), 'repohost-wrk-'));
    try {
      const file = join(dir, 'phase.lua');
      await writeFile(file, script(job.workload));
      // Both runs' tokens are signed before either starts, so the signing is not on the cores meanwhile.
      const sign = job.workload.kind === 'fresh-token' ? await createSigner(job.workload.key) : null;
      const scriptArgs = async (ms: number, name: string): Promise<string[]> => {
        if (!sign) return [];
        const tokens = join(dir, name);
        await writeTokens(tokens, sign, Math.ceil((ms / 1000) * FRESH_TOKENS_PER_S));
        return ['--', tokens, String(threads)];
      };
      const warmupArgs = job.warmupMs > 0 ? await scriptArgs(job.warmupMs, 'warmup.tokens') : [];
      const measuredArgs = await scriptArgs(job.durationMs, 'measured.tokens');
      const args = (ms: number, extra: string[]): string[] => ['-t', String(threads), '-c', String(connections), '-d', seconds(ms), '--timeout', timeout, '-s', file, url, ...extra];
      markStarted();
      if (job.warmupMs > 0) {
        current = runWrk(args(job.warmupMs, warmupArgs));
        await current.done;
      }
      if (stopped) throw new Error('wrk phase stopped during its warm-up');
      current = runWrk(args(job.durationMs, measuredArgs));
      const { outcome, cpuSec } = await current.done;
      return toResult(job, outcome, cpuSec, job.workload.kind === 'static' ? job.workload.requests[0]?.kind ?? 'read' : 'read');
    } finally {
      clearInterval(ticker);
      await rm(dir, { recursive: true, force: true });
    }
  })();
  result.then(markStarted, markStarted);
  return {
    started,
    result,
    stop() {
      stopped = true;
      current?.stop();
    },
  };
}
