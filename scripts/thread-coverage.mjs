/**
 * The middle step of `npm run coverage`: adds the coverage of the processes the tests spawn
 * (servers, CLIs), every thread of them, to what tap measured in the test processes. The children
 * write Node's own coverage (NODE_V8_COVERAGE, set by test/helpers/child-env.ts) to
 * .tap/thread-coverage, one file per thread; tap's report reads .tap/coverage. Each file is kept
 * to the compiled sources tap would measure (dist/src, without the generated protobuf code) and
 * moved there; the rest (node_modules, Node's own modules) is dropped.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const from = join(root, '.tap/thread-coverage');
const to = join(root, '.tap/coverage');
const measured = pathToFileURL(join(root, 'dist/src/')).href;
const generated = pathToFileURL(join(root, 'dist/src/protocol/generated/')).href;
const kept = (url) => url.startsWith(measured) && !url.startsWith(generated);

let files = [];
try {
  files = readdirSync(from).filter((f) => f.endsWith('.json'));
} catch {
  // no child wrote coverage
}
mkdirSync(to, { recursive: true });
let written = 0;
for (const file of files) {
  let coverage;
  try {
    coverage = JSON.parse(readFileSync(join(from, file), 'utf8'));
  } catch {
    continue; // a thread cut off while writing (its process was killed)
  }
  const result = coverage.result.filter((script) => kept(script.url));
  if (result.length === 0) continue;
  const maps = coverage['source-map-cache'] ?? {};
  const sourceMaps = Object.fromEntries(result.filter((s) => maps[s.url]).map((s) => [s.url, maps[s.url]]));
  writeFileSync(join(to, `thread-${file}`), JSON.stringify({ result, 'source-map-cache': sourceMaps }));
  written++;
}
rmSync(from, { recursive: true, force: true });
console.log(`thread coverage: ${written} of ${files.length} thread files added`);
