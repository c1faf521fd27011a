/**
 * tap starts each test file with NODE_OPTIONS importing its process-info hooks, and every node
 * child of a test (a server, the CLI, the bench runner, each of their worker threads) inherits
 * them: a server then took 3.4–3.9 s of CPU to start instead of 2.1–2.2 s. They serve coverage
 * of the children (`npm run coverage`) only, so without coverage the children start plain.
 * Imported for this effect by every helper that spawns node.
 */
if (process.env.TAP_DISABLE_COVERAGE === '1' && process.env.NODE_OPTIONS) {
  process.env.NODE_OPTIONS = process.env.NODE_OPTIONS.split(/\s+/)
    .filter((option) => !option.includes('@tapjs/processinfo'))
    .join(' ');
}

export {};
