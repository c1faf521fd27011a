/**
 * The memory of a test server's process while something large passes through it, from /proc:
 * anonymous resident memory (heaps and buffers of every thread: what streaming must bound),
 * file-backed resident memory (LMDB pages mapped from the data file: page cache) and VmRSS.
 */
import { readFileSync } from 'node:fs';

export interface ServerMemory {
  rss: number;
  anon: number;
  file: number;
}

const MiB = 1024 * 1024;

function read(pid: number): ServerMemory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

export interface MemoryGrowth {
  baseline: ServerMemory;
  /** Peak minus baseline of each figure, in bytes. */
  grew: ServerMemory;
  /** The growth as the tests print it. */
  describe(): string;
}

/** Samples the process every 50 ms from now until `stop`, which reports the peak growth. */
export function sampleMemory(pid: number): { stop(): Promise<MemoryGrowth> } {
  const baseline = read(pid);
  const peak = { ...baseline };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const m = read(pid);
      peak.rss = Math.max(peak.rss, m.rss);
      peak.anon = Math.max(peak.anon, m.anon);
      peak.file = Math.max(peak.file, m.file);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await sampler;
      const grew = { rss: peak.rss - baseline.rss, anon: peak.anon - baseline.anon, file: peak.file - baseline.file };
      const mib = (n: number): string => `${(n / MiB).toFixed(0)} MiB`;
      return { baseline, grew, describe: () => `anonymous ${mib(grew.anon)}, file-backed ${mib(grew.file)}, VmRSS ${mib(grew.rss)} (baseline ${mib(baseline.rss)})` };
    },
  };
}
