/**
 * One progress bar per phase (cli-progress, on stderr so stdout keeps only the summary table).
 * Without a TTY it prints one line per phase instead, so CI logs stay readable.
 */
import cliProgress from 'cli-progress';
import type { ProgressUpdate } from './load-client.js';

export interface PhaseProgress {
  update(p: ProgressUpdate): void;
  done(summary: string): void;
}

export class ProgressReporter {
  constructor(private readonly enabled: boolean) {}

  phase(label: string): PhaseProgress {
    if (!this.enabled || !process.stderr.isTTY) {
      return {
        update() {},
        done(summary) {
          process.stderr.write(`[bench] ${label}: ${summary}\n`);
        },
      };
    }
    const bar = new cliProgress.SingleBar(
      {
        format: `${label.padEnd(34)} [{bar}] {percentage}% | {elapsed_s}/{total_s}s | {rate} req/s | {completed} done`,
        hideCursor: true,
        clearOnComplete: true,
        barsize: 24,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(p) {
        const payload = {
          elapsed_s: (p.elapsedMs / 1000).toFixed(1),
          total_s: (p.totalMs / 1000).toFixed(1),
          rate: Math.round(p.rate).toLocaleString('en-US'),
          completed: p.completed.toLocaleString('en-US'),
        };
        if (!started) {
          bar.start(Math.max(1, Math.round(p.totalMs)), 0, payload);
          started = true;
        }
        bar.update(Math.round(p.elapsedMs), payload);
      },
      done(summary) {
        if (started) bar.stop();
        process.stderr.write(`[bench] ${label}: ${summary}\n`);
      },
    };
  }

  log(message: string): void {
    process.stderr.write(`[bench] ${message}\n`);
  }
}
