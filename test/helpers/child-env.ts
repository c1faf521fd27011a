/**
 * tap runs each test file with its process-info hooks imported through NODE_OPTIONS, and adds
 * them again to every process a test spawns (a listener of `process-on-spawn` rewrites each
 * child's environment): every server, CLI and bench runner, in each of its worker threads, then
 * loaded them. A server took 3.4–3.9 s of CPU to start with them, 2.1–2.2 s without, and the
 * suite spawns ~300 node processes. They serve coverage of the children (`npm run coverage`)
 * only, so without coverage this removes them: the listener (its state is a documented global
 * singleton of that package) and the option. Imported for this effect by every helper that
 * spawns node.
 */
if (process.env.TAP_DISABLE_COVERAGE === '1') {
  const onSpawn = (globalThis as Record<symbol, { listeners?: unknown[] } | undefined>)[Symbol.for('process-on-spawn@*:singletonId')];
  onSpawn?.listeners?.splice(0);
  if (process.env.NODE_OPTIONS) {
    process.env.NODE_OPTIONS = process.env.NODE_OPTIONS.split(/\s+/)
      .filter((option) => !option.includes('@tapjs/processinfo'))
      .join(' ');
  }
}

export {};
