import t from 'tap';
import { performance } from 'node:perf_hooks';
import { allOwnedBy, startForwardNodes } from '../helpers/forward-nodes.js';
import type { TestServer } from '../helpers/server.js';

// The cost of the hop (docs/measurements/2026-11-27-forwarding.md): the same read and the same
// write, sequentially, straight to the owner and through a node that owns nothing. A short run
// checks that the hop stays a hop; REPOHOST_LONG_TESTS=1 takes the figures.
const ROUNDS = process.env.REPOHOST_LONG_TESTS === '1' ? 3000 : 200;

const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

async function timed(s: TestServer, token: string, method: string, path: string, body?: unknown): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    const res = await fetch(`${s.url}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(typeof body === 'function' ? (body as (i: number) => unknown)(i) : body) : undefined,
    });
    await res.arrayBuffer();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status}`);
    ms.push(performance.now() - started);
  }
  return ms;
}

t.test('the hop through a non-owner', async (t) => {
  const [a, b] = await startForwardNodes(t, [{ id: 'a', owners: allOwnedBy('a') }, { id: 'b', owners: allOwnedBy('a') }]);
  const token = await a!.token();
  t.equal((await a!.api('POST', '/acme/repos', { body: { name: 'hop' } })).status, 201);
  // A new repository's `main` is at the root change; moving it there again is a full write.
  const root = 'z'.repeat(32);
  const figures: Record<string, { p50: number; p99: number }> = {};
  for (const [name, method, path, body] of [
    ['read', 'GET', '/acme/hop/bookmarks/main', undefined],
    ['write', 'PATCH', '/acme/hop/bookmarks/main', () => ({ change_id: root })],
  ] as const) {
    for (const [via, s] of [['direct', a!], ['forwarded', b!]] as const) {
      await timed(s, token, method, path, body); // warm the connections and caches
      const ms = await timed(s, token, method, path, body);
      figures[`${name} ${via}`] = { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
    }
    const added = figures[`${name} forwarded`]!.p50 - figures[`${name} direct`]!.p50;
    t.ok(added < 25, `${name}: the hop adds ${added.toFixed(2)} ms at p50`);
  }
  t.comment(JSON.stringify(figures, (_, v: unknown) => (typeof v === 'number' ? Number(v.toFixed(3)) : v)));
});
