/**
 * What a server process wrote, for the write-bytes curve of the scale family.
 *
 * - `/proc/<pid>/io` counts every thread of the process: `write_bytes` is charged when a page of
 *   the page cache turns dirty, a whole folio at a time (so it can exceed what reaches the disk),
 *   `wchar` is what the process handed to write calls.
 * - With `perf` (root or a permissive `perf_event_paranoid`), a trace of the process's threads
 *   counts its sync calls (fsync, fdatasync, msync, sync_file_range) and sums the block-layer write
 *   requests they issued: the bytes that reached the device on the process's account (writeback
 *   run by the kernel's own threads, the file system's journal included, is not in it).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

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
