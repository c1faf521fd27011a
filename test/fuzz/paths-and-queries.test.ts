/**
 * Schema-driven fuzzing of request targets: for every route of the route table, path parameters
 * (the fixture's own, unknown ones, edge-case text, broken or overlong percent-encoding, huge
 * segments) and query strings drawn from the route's query spec (values in and out of range,
 * unknown and repeated keys, prototype keys, tag filters past their limits, forged cursors).
 * The assertions are in fuzz-run.ts.
 *
 * CI sends a short fixed-seed run. Longer runs:
 *   REPOHOST_FUZZ_RUNS=100000 npx tap dist/test/fuzz/paths-and-queries.test.js
 *   REPOHOST_FUZZ_SEED=random (or a number printed by a failure) to draw other requests.
 */
import t from 'tap';
import { routes } from '../../src/http/routes/index.js';
import { fuzzRoutes } from './fuzz-run.js';

t.test('fuzz - mutated paths and query strings of every route get a success or a 4xx envelope in time, never a 5xx', (t) =>
  fuzzRoutes(t, { routes, profile: { params: 5, query: 5, body: 1, tokens: 'admin' }, ciRuns: 500 }),
);
