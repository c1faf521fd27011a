/**
 * What a server process costs outside the requests the bench times: the CPU it uses while no
 * request arrives (start-up work, background scans), and what it writes (the write-bytes curve).
 *
 * - `/proc/<pid>/io` counts every thread of the process: `write_bytes` is charged when a page of
 *   the page cache turns dirty, a whole folio at a time (so it can exceed what reaches the disk),
 *   `wchar` is what the process handed to write calls.
 * - With `perf` (root or a permissive `perf_event_paranoid`), a trace of the process's threads
 *   counts its sync calls (fsync, fdatasync, msync, sync_file_range) and sums the block-layer write
 *   requests they issued: the bytes that reached the device on the process's account (writeback
 *   run by the kernel's own threads, the file system's journal included, is not in it).
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ProcessIo {
  writeBytes: number;
  wchar: number;
}

export async function readProcessIo(pid: number): Promise<ProcessIo | null> {
  try {
    const text = await readFile(`/proc/${pid}/io`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}:\\s*(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    const io = { writeBytes: field('write_bytes'), wchar: field('wchar') };
    return Number.isFinite(io.writeBytes) && Number.isFinite(io.wchar) ? io : null;
  } catch {
    return null;
  }
}

/** Clock ticks per second of /proc/<pid>/stat's CPU times. */
const CLOCK_TICKS = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system, every thread) the process has used so far; NaN once it is gone. */
export async function processCpuSeconds(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/** The process's CPU over the next `windowMs`, as a share of one core. */
export async function cpuShare(pid: number, windowMs: number): Promise<number> {
  const before = await processCpuSeconds(pid);
  const started = performance.now();
  await sleep(windowMs);
  const after = await processCpuSeconds(pid);
  return (after - before) / ((performance.now() - started) / 1000);
}

/**
 * Waits until the process used less than `share` of one core over a second (its start-up work
 * done); the seconds that took, or null when it was still busier at `timeoutMs`.
 */
export async function waitForQuiet(pid: number, share: number, timeoutMs: number): Promise<number | null> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if ((await cpuShare(pid, 1000)) < share) return (performance.now() - started) / 1000;
  }
  return null;
}

export interface SyncTraceTotals {
  /** fsync + fdatasync + msync + sync_file_range calls. */
  syncCalls: number;
  /** Block-layer write requests issued by the process's threads, and their bytes. */
  blockWrites: number;
  blockWriteBytes: number;
}

export interface SyncTrace {
  /** Ends the trace and reads it back. */
  stop(): Promise<SyncTraceTotals>;
}

const EVENTS = [
  'syscalls:sys_enter_fsync',
  'syscalls:sys_enter_fdatasync',
  'syscalls:sys_enter_msync',
  'syscalls:sys_enter_sync_file_range',
  'block:block_rq_issue',
];

const ENABLE_TIMEOUT_MS = 30_000;

/**
 * Starts `perf record` on every thread of `pid`, events disabled until perf acknowledges the
 * `enable` command (so the caller knows the trace runs before it starts the load). Throws with
 * perf's reason when perf is missing or not permitted.
 */
export async function startSyncTrace(pid: number, dir: string, name: string): Promise<SyncTrace> {
  const file = join(dir, `${name}.perf.data`);
  // fd 3: commands to perf; fd 4: its acknowledgements.
  const perf: ChildProcess = spawn('perf', ['record', '-q', '-D', '-1', '--control', 'fd:3,4', '-o', file, '-e', EVENTS.join(','), '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  perf.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = once(perf, 'exit').then(([code]) => code as number | null);
  const failed = new Promise<never>((_, reject) => {
    perf.on('error', (err) => reject(new Error(`perf: ${err.message}`)));
    void exited.then((code) => reject(new Error(`perf exited with ${code} before tracing: ${stderr.trim().slice(0, 300)}`)));
  });
  const control = perf.stdio[3] as Writable;
  const acks = perf.stdio[4] as Readable;
  control.write('enable\n');
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('perf did not acknowledge "enable"')), ENABLE_TIMEOUT_MS).unref());
  try {
    await Promise.race([once(acks, 'data'), failed, timeout]);
  } catch (err) {
    perf.kill('SIGKILL');
    throw err;
  }
  failed.catch(() => undefined);
  return {
    async stop() {
      perf.kill('SIGINT');
      await exited;
      return readTrace(file);
    },
  };
}

async function readTrace(file: string): Promise<SyncTraceTotals> {
  const script = spawn('perf', ['script', '-i', file, '-F', 'event,trace'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const totals: SyncTraceTotals = { syncCalls: 0, blockWrites: 0, blockWriteBytes: 0 };
  let pending = '';
  const line = (text: string): void => {
    const block = /block:block_rq_issue:\s+\S+\s+(\S+)\s+(\d+)\s/.exec(text);
    if (block) {
      // rwbs: W = write; a flush request without data carries 0 bytes.
      if (block[1]!.includes('W')) {
        totals.blockWrites++;
        totals.blockWriteBytes += Number(block[2]);
      }
    } else if (/syscalls:sys_enter_(fsync|fdatasync|msync|sync_file_range):/.test(text)) {
      totals.syncCalls++;
    }
  };
  script.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    lines.forEach(line);
  });
  const [code] = (await once(script, 'exit')) as [number | null];
  line(pending);
  if (code !== 0) throw new Error(`perf script exited with ${code}`);
  return totals;
}
