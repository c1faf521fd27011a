import t from 'tap';
import { performance } from 'node:perf_hooks';
import { allOwnedBy, startCluster } from '../helpers/cluster.js';
import { orgShard } from '../../src/storage/shards.js';
import type { TestServer } from '../helpers/server.js';

// The cost of the hop (docs/measurements/2026-11-27-forwarding.md): the same read and the same
// write, sequentially, straight to the owner and through a node that owns nothing. A measurement
// with timing bounds, so behind REPOHOST_LONG_TESTS=1 (on a shared machine the bounds are noise;
// forwarding.test.ts proves the behaviour).
const ROUNDS = 3000;
const skip = process.env.REPOHOST_LONG_TESTS === '1' ? false : 'a measurement: set REPOHOST_LONG_TESTS=1';

const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

async function timed(s: TestServer, token: string, method: string, path: string, body?: unknown, rounds = ROUNDS): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
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

t.test('the hop through a non-owner', { skip }, async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', fixedPlacement: { a: allOwnedBy('a'), b: allOwnedBy('a') } });
  await cluster.settled();
  const [a, b] = cluster.nodes;
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

t.test('actor messages to another node: a repository create whose saga steps go there', { skip }, async (t) => {
  // `c` owns only the org's shard, `d` every other: each create's repository steps cross to `d`.
  const rounds = Math.min(ROUNDS, 500);
  const local = await startCluster(t, { log: 'etcd', fixedPlacement: { a: allOwnedBy('a') } });
  await local.settled();
  const [a] = local.nodes;
  const orgOnly = (orgId: string): Record<string, string> => ({ default: 'd', [String(orgShard(orgId))]: 'c' });
  const split = await startCluster(t, { log: 'etcd', fixedPlacement: { c: orgOnly, d: orgOnly } });
  await split.settled();
  const [c, d] = split.nodes;
  const figures: Record<string, { p50: number; p99: number }> = {};
  for (const [via, s] of [['local', a!], ['steps forwarded', c!]] as const) {
    const token = await s.token();
    const create = (prefix: string) => (i: number) => ({ name: `${prefix}${i}` });
    await timed(s, token, 'POST', '/acme/repos', create('warm'), 50);
    const ms = await timed(s, token, 'POST', '/acme/repos', create('r'), rounds);
    figures[`create ${via}`] = { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
  }
  const metrics = await c!.metrics();
  const sent = Number(/repohost_forwarded_total\{kind="actor",outcome="answered"\} (\d+)/.exec(metrics)?.[1] ?? 0);
  t.ok(sent >= rounds, `c forwarded ${sent} actor messages for ${rounds + 50} creates`);
  t.equal((await d!.api('GET', '/acme/r0')).status, 200, 'the repository lives on d');
  const added = figures['create steps forwarded']!.p50 - figures['create local']!.p50;
  t.ok(added < 50, `the forwarded steps add ${added.toFixed(2)} ms at p50`);
  t.comment(JSON.stringify({ ...figures, actorMessagesPerCreate: sent / (rounds + 50) }, (_, v: unknown) => (typeof v === 'number' ? Number(v.toFixed(3)) : v)));
});
