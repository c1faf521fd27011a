/**
 * Orchestrator side of the load generator: forks `load-generator.js`, hands it one job, relays
 * progress and returns its result. A fresh process per phase keeps phases independent (no JIT or
 * socket state carried over) and makes "stop early" a plain message.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FromGenerator, GeneratorJob, GeneratorResult, ToGenerator } from './generator-protocol.js';

const GENERATOR_ENTRY = fileURLToPath(new URL('./load-generator.js', import.meta.url));

export interface ProgressUpdate {
  elapsedMs: number;
  totalMs: number;
  completed: number;
  rate: number;
}

export interface GeneratorRun {
  /** Resolves when the generator's clock starts (process up, connections open). */
  started: Promise<void>;
  result: Promise<GeneratorResult>;
  /** Ends the measurement window early; the result still arrives through `result`. */
  stop(): void;
}

export function startGenerator(job: GeneratorJob, onProgress: (p: ProgressUpdate) => void): GeneratorRun {
  // A larger young generation means fewer scavenges at the generator's allocation rate; its GC
  // pauses would otherwise be measured as server latency.
  const child: ChildProcess = fork(GENERATOR_ENTRY, [], {
    execArgv: ['--max-semi-space-size=32'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const result = new Promise<GeneratorResult>((resolve, reject) => {
    let settled = false;
    child.on('message', (message: FromGenerator) => {
      if (message.type === 'started') markStarted();
      else if (message.type === 'progress') onProgress(message);
      else if (message.type === 'result') {
        settled = true;
        resolve(message.result);
      } else {
        settled = true;
        reject(new Error(`load generator failed: ${message.message}`));
      }
    });
    child.on('exit', (code, signal) => {
      if (!settled) reject(new Error(`load generator exited (code ${code}, signal ${signal}) without a result`));
    });
    child.on('error', (err) => {
      if (!settled) reject(err);
    });
  });
  const message: ToGenerator = { type: 'run', job };
  child.send(message);
  // A generator that fails before starting must not leave `started` waiting forever.
  result.then(markStarted, markStarted);
  return {
    started,
    result,
    stop() {
      if (child.connected) child.send({ type: 'stop' } satisfies ToGenerator);
    },
  };
}

export function runGenerator(job: GeneratorJob, onProgress: (p: ProgressUpdate) => void): Promise<GeneratorResult> {
  return startGenerator(job, onProgress).result;
}
