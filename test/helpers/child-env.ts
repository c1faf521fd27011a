/**
 * tap runs each test file with its process-info hooks imported through NODE_OPTIONS, and adds
 * them again to every process a test spawns (a listener of `process-on-spawn` rewrites each
 * child's environment): every server, CLI and bench runner, in each of its worker threads, then
 * loaded them. A server took 3.4–3.9 s of CPU to start with them, 2.1–2.2 s without, and the
 * suite spawns ~300 node processes. This removes them for the children: the listener (its state
 * is a documented global singleton of that package) and the option. Imported for this effect by
 * every helper that spawns node.
 *
 * The hooks measure coverage of a process's main thread only (an inspector session there). With
 * coverage on (`npm run coverage`), the children write Node's own coverage instead
 * (NODE_V8_COVERAGE), which covers every thread, workers included, each as it ends; the
 * coverage script adds those files to tap's (scripts/thread-coverage.mjs).
 */
const onSpawn = (globalThis as Record<symbol, { listeners?: unknown[] } | undefined>)[Symbol.for('process-on-spawn@*:singletonId')];
onSpawn?.listeners?.splice(0);
if (process.env.NODE_OPTIONS) {
  process.env.NODE_OPTIONS = process.env.NODE_OPTIONS.split(/\s+/)
    .filter((option) => !option.includes('@tapjs/processinfo'))
    .join(' ');
}
const root = process.env._TAPJS_PROCESSINFO_CWD_;
if (process.env.TAP_DISABLE_COVERAGE !== '1' && process.env._TAPJS_PROCESSINFO_COVERAGE_ === '1' && root) {
  process.env.NODE_V8_COVERAGE = `${root}/.tap/thread-coverage`;
}

export {};
