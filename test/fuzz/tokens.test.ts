/**
 * Fuzzing of authentication: every route of the route table called with valid tokens of every
 * scope and restriction (by name, by id, by key, another org's) and with broken ones (garbage,
 * expired, issued in the future, oversized, HS256, `alg: none`, tampered, wrong audience or
 * issuer, disabled or revoked key, `__proto__` in header or claims), plus validly signed tokens
 * whose header and claims were mutated. The assertions are in fuzz-run.ts.
 *
 * CI sends a short fixed-seed run. Longer runs:
 *   REPOHOST_FUZZ_RUNS=100000 npx tap dist/test/fuzz/tokens.test.js
 *   REPOHOST_FUZZ_SEED=random (or a number printed by a failure) to draw other requests.
 */
import t from 'tap';
import { routes } from '../../src/http/routes/index.js';
import { fuzzRoutes } from './fuzz-run.js';

t.test('fuzz - every route under every kind of token gets a success or a 4xx envelope in time, never a 5xx', (t) =>
  fuzzRoutes(t, { routes, profile: { params: 1, query: 1, body: 1, tokens: 'all' }, ciRuns: 400 }),
);
