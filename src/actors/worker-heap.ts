import { setFlagsFromString } from 'node:v8';

/** Where a worker isolate's old generation starts, in MiB (V8's `--initial-old-space-size`). */
const WORKER_INITIAL_OLD_SPACE_MB = 64;

/**
 * Applies to every isolate created after this call: the actor, read and system workers. A worker
 * keeps 12–20 MB live, and V8 derives such a small heap's collection limit from its live size, so
 * under a steady write load an actor worker ran a full mark-compact about five times a second, and
 * a pause inside a batch holds LMDB's write lock (measurements: docs/operating.md, "Worker heaps").
 * The main thread's heap was set up before any code ran and keeps V8's defaults.
 */
export function configureWorkerHeaps(): void {
  setFlagsFromString(`--initial-old-space-size=${WORKER_INITIAL_OLD_SPACE_MB}`);
}
