/**
 * Load-generator child process (forked by load-client.ts). It runs in its own process so that it
 * never shares an event loop with the server or the orchestrator: one job per process, then exit.
 */
import type { FromGenerator, ToGenerator } from './generator-protocol.js';
import { LoadEngine } from './load-engine.js';
import { createWorkload } from './workloads.js';

function send(message: FromGenerator): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

let engine: LoadEngine | null = null;
let stopEarly = false;

process.on('message', (message: ToGenerator) => {
  if (message.type === 'stop') {
    // A stop can overtake the set-up (key import, connection set-up): keep it.
    stopEarly = true;
    engine?.stop();
    return;
  }
  void (async () => {
    try {
      const workload = await createWorkload(message.job.workload, `${message.job.host}:${message.job.port}`);
      engine = new LoadEngine(
        message.job,
        workload,
        (p) => void send({ type: 'progress', ...p }),
        () => void send({ type: 'started' }),
      );
      if (stopEarly) engine.stop();
      const result = await engine.run();
      await send({ type: 'result', result });
    } catch (err) {
      await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    }
    process.disconnect?.();
  })();
});

if (!process.send) {
  console.error('load-generator.js is a child process entry: run `npm run bench` instead');
  process.exit(2);
}
