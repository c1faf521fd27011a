/**
 * `scale:write-bytes`: what one write costs the disk, on agent-fleet's workload (N agents, one
 * repository and bookmark each, apply-ops of 3 × 2 KiB on top of the previous change), closed loop
 * then open loop at the configured fraction of it, on a server of its own so that its process's
 * counters hold nothing else. Each repository gets its first write (a seed file on its default
 * bookmark) before anything is counted, and the server is left to finish the analytics that
 * starts; the agents then write their own bookmarks. Around each phase:
 * - `/proc/<pid>/io` write_bytes (charged at page-dirtying time, a whole page-cache folio at a
 *   time) and wchar;
 * - with perf: the server threads' sync calls and block-layer write requests (bytes that reached
 *   the device on the server's account; the file system's journal, written by its own thread, is
 *   not in it);
 * - the server's metrics: LMDB transactions, pages written, flushed batches.
 * Every figure is divided by the writes acknowledged between the two snapshots (warm-up and drain
 * included, as the counters are).
 */
import { readProcessIo, startSyncTrace, waitForQuiet } from '../process-io.js';
import type { SyncTrace, SyncTraceTotals } from '../process-io.js';
import type { AgentState } from '../generator-protocol.js';
import { round, runPhase } from '../phases.js';
import type { PhaseResult } from '../report-types.js';
import { CurveBuilder } from '../scale-curves.js';
import { OwnServer } from '../scale-server.js';
import { PAGE_BYTES, readServerCounters, type ServerCounters } from '../server-counters.js';
import { createAgents, totalWrites, verifyAgents } from './agent-writes.js';
import type { ScaleOutcome } from './scale.js';
import type { ScenarioContext, ScenarioSettings } from './types.js';
import { requireTarget } from './types.js';

const TARGET_BYTES = 32 * 1024;
const SEED_FILE = 'seed.txt';
const QUIET_SHARE = 0.1;
/** How long the seed's analytics may keep the server busy, in phases' worth of time (120 s by default). */
const QUIET_TIMEOUT_PHASES = 40;

export function writeBytesParameters(s: ScenarioSettings): Record<string, string | number> {
  return {
    agents: s.agents,
    filesPerWrite: s.writeFiles,
    fileBytes: s.writeFileBytes,
    openFraction: s.openFraction,
    durationSec: s.scaleDurationMs / 1000,
    warmupSec: s.scaleWarmupMs / 1000,
  };
}

interface Counters {
  writeBytes: number;
  wchar: number;
  server: ServerCounters | null;
}

async function counters(own: OwnServer): Promise<Counters> {
  const io = await readProcessIo(own.pid);
  return { writeBytes: io?.writeBytes ?? NaN, wchar: io?.wchar ?? NaN, server: await readServerCounters(own.metricsUrl) };
}

/** Per-write figures; NaN (a counter that could not be read) leaves the figure out. */
function perWrite(writes: number, before: Counters, after: Counters, trace: SyncTraceTotals | null): Record<string, number> {
  const per = (a: number, b: number): number => round((a - b) / writes, 2);
  const server = (of: (c: ServerCounters) => number): number => (after.server && before.server ? per(of(after.server), of(before.server)) : NaN);
  const figures: Record<string, number> = {
    writes,
    writeBytesPerWrite: per(after.writeBytes, before.writeBytes),
    wcharPerWrite: per(after.wchar, before.wchar),
    lmdbPagesPerWrite: server((c) => c.pagesWritten),
    lmdbBytesPerWrite: server((c) => c.pagesWritten * PAGE_BYTES),
    transactionsPerWrite: server((c) => c.transactions),
    flushedBatchesPerWrite: server((c) => c.batches),
  };
  if (trace) {
    figures.deviceBytesPerWrite = round(trace.blockWriteBytes / writes, 2);
    figures.deviceRequestsPerWrite = round(trace.blockWrites / writes, 2);
    figures.syncCallsPerWrite = round(trace.syncCalls / writes, 3);
  }
  return Object.fromEntries(Object.entries(figures).filter(([, v]) => Number.isFinite(v)));
}

export async function runScaleWriteBytes(base: ScenarioContext): Promise<ScaleOutcome> {
  const s = base.settings;
  const own = await OwnServer.create(base, 'scale-write-bytes');
  const bytes = new CurveBuilder('write-bytes', 'Bytes written per apply-ops (agent-fleet: 3 × 2 KiB) vs write rate', 'writes/s', 'bytes/write');
  const syncs = new CurveBuilder('write-syncs', 'Syncs per apply-ops (agent-fleet) vs write rate', 'writes/s', 'per write');
  const metrics: Record<string, number> = {};
  const phases: PhaseResult[] = [];
  let traceNote = 'perf: sync calls and block requests of the server threads';
  let settleNote = '';
  let traced = false;
  try {
    const ctx = own.context();
    const { target } = requireTarget(ctx);
    // Seeded: each repository's first write (which moves its default bookmark and so starts an
    // analytics computation) happens before the counters; the agents then write their own
    // bookmarks, and the phases count what writes cost in the steady state.
    let agents: AgentState[] = (await createAgents(ctx, { count: s.agents, sharedRepo: null, repoPrefix: `${base.prefix}-wb`, seedFile: SEED_FILE })).agents;
    const timeoutMs = QUIET_TIMEOUT_PHASES * s.scaleDurationMs;
    const settled = await waitForQuiet(own.pid, QUIET_SHARE, timeoutMs);
    settleNote = settled === null ? `still busy ${timeoutMs / 1000} s after the seed` : `quiet ${round(settled, 1)} s after the seed`;
    for (const mode of ['closed', 'open'] as const) {
      const closed = phases[0];
      if (mode === 'open' && !(closed && closed.throughput > 0)) break;
      let trace: SyncTrace | null = null;
      try {
        trace = await startSyncTrace(own.pid, base.workDir, `scale-write-bytes-${mode}`);
      } catch (err) {
        traceNote = `no perf trace (${err instanceof Error ? err.message : String(err)}): syncs are the server's flushed batches`;
      }
      const before = await counters(own);
      const writesBefore = totalWrites(agents);
      const label = `scale write-bytes agent-fleet ${mode}`;
      const out = await runPhase(ctx, {
        label,
        host: target.host,
        port: target.port,
        mode,
        rate: mode === 'open' ? closed!.throughput * s.openFraction : undefined,
        durationMs: s.scaleDurationMs,
        warmupMs: s.scaleWarmupMs,
        workload: { kind: 'agents', org: target.org, token: await ctx.token(), agents, files: s.writeFiles, fileBytes: s.writeFileBytes, readRatio: 0, readPaths: [] },
      });
      const totals = trace
        ? await trace.stop().catch((err: unknown) => {
            traceNote = `perf trace unreadable (${err instanceof Error ? err.message : String(err)}): syncs are the server's flushed batches`;
            return null;
          })
        : null;
      traced ||= totals !== null;
      const after = await counters(own);
      agents = out.raw.agents ?? agents;
      const writes = totalWrites(agents) - writesBefore;
      phases.push({ ...out.phase, label });
      if (writes === 0) continue;
      const figures = perWrite(writes, before, after, totals);
      for (const [k, v] of Object.entries(figures)) metrics[`${mode}.${k}`] = v;
      const rate = out.phase.throughput;
      if (figures.deviceBytesPerWrite !== undefined) bytes.add('device (block requests)', rate, figures.deviceBytesPerWrite);
      if (figures.writeBytesPerWrite !== undefined) bytes.add('write_bytes (/proc)', rate, figures.writeBytesPerWrite);
      if (figures.lmdbBytesPerWrite !== undefined) bytes.add('LMDB pages × 4 KiB', rate, figures.lmdbBytesPerWrite);
      if (figures.syncCallsPerWrite !== undefined) syncs.add('sync calls (perf)', rate, figures.syncCallsPerWrite);
      if (figures.flushedBatchesPerWrite !== undefined) syncs.add('flushed batches (server)', rate, figures.flushedBatchesPerWrite);
    }
    const verification = await verifyAgents(ctx, agents);
    const judged = traced ? 'device (block requests)' : 'write_bytes (/proc)';
    return {
      phases,
      curves: [
        bytes.build({ text: `≤ 32 KiB written to the device per write on agent-fleet (judged on ${judged})`, kind: 'ceiling', limit: TARGET_BYTES, series: [judged] }),
        syncs.build(),
      ],
      metrics,
      verification,
      problems: [],
      parameters: { syncTrace: traceNote, seed: settleNote },
    };
  } finally {
    await own.stop();
  }
}
