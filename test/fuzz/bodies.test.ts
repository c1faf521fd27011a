/**
 * Schema-driven fuzzing of request bodies: for every route that takes a body, bodies drawn from
 * its JSON Schema (and from a valid example) are mutated — wrong types, missing and extra fields,
 * lengths at the limits, numbers no integer holds, unicode edge cases, prototype keys — and sent
 * as JSON text that may be cut short, carry bytes that are not UTF-8, be chunked, or come with
 * another content type. The assertions are in fuzz-run.ts.
 *
 * CI sends a short fixed-seed run. Longer runs:
 *   REPOHOST_FUZZ_RUNS=100000 npx tap dist/test/fuzz/bodies.test.js
 *   REPOHOST_FUZZ_SEED=random (or a number printed by a failure) to draw other requests.
 */
import t from 'tap';
import { routes } from '../../src/http/routes/index.js';
import { fuzzRoutes } from './fuzz-run.js';
import { takesBody } from './request-plans.js';

t.test('fuzz - mutated bodies of every writing route get a success or a 4xx envelope in time, never a 5xx', (t) =>
  fuzzRoutes(t, { routes: routes.filter(takesBody), profile: { params: 1, query: 1, body: 7, tokens: 'admin' }, ciRuns: 400 }),
);
