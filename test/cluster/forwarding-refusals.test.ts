import t from 'tap';
import { startCluster } from '../helpers/cluster.js';
import { orgShard } from '../../src/storage/shards.js';

// Forwarding's refusals (docs/design.md, "Forwarding"): stale routes, and an owner that stopped
// answering. Real repohost processes whose placement is a fixed table per node (the test seam
// until the control plane places shards); two nodes may disagree, as views do while a placement
// change propagates.

function counter(metrics: string, name: string, labels: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('a stale route gets 503 with Retry-After and never a second hop', async (t) => {
  // Each node believes the other owns every shard, except the org's shard, which both give to `a`.
  let org = '';
  // `e` is further behind: it still gives every shard, the org's too, to `b`.
  const cluster = await startCluster(t, {
    log: 'etcd',
    fixedPlacement: {
      a: (orgId) => ({ default: 'b', [(org = String(orgShard(orgId)))]: 'a' }),
      b: (orgId) => ({ default: 'a', [String(orgShard(orgId))]: 'a' }),
      e: () => ({ default: 'b' }),
    },
  });
  await cluster.settled();
  const [a, b, e] = cluster.nodes;

  // A request b proxies to a for the org's shard, which a owns: served.
  const created = await b!.api('GET', '/acme/repos');
  t.equal(created.status, 200, 'the org shard is served by its owner through b');
  t.equal(created.headers.get('x-repohost-node'), 'a');

  // A repository create: a runs the org's saga and sends the repository's step to b, which
  // believes a owns that shard: b refuses it, and a answers the client 503.
  const made = await a!.api('POST', '/acme/repos', { body: { name: 'stale' } });
  t.equal(made.status, 503, `a stale actor route is 503 (${made.text})`);
  t.equal(made.json?.error?.code, 'UNAVAILABLE');
  t.ok(Number(made.headers.get('retry-after')) >= 1, 'with Retry-After');
  // The saga's step and its compensation each meet the stale route once; none is forwarded on.
  const refused = counter(await b!.metrics(), 'repohost_stale_route_refusals_total', 'kind="actor"');
  t.ok(refused >= 1, `b refused ${refused} forwarded messages`);
  t.equal(counter(await a!.metrics(), 'repohost_forwarded_total', 'kind="actor",outcome="stale_route"'), refused, 'a counted each of them stale');
  t.equal(counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="actor",outcome="answered"'), 0, 'b forwarded none of them on');

  // A request marked as forwarded for a shard the receiver does not own: 503, not forwarded on.
  const other = String((Number(org) + 1) % 256);
  const before = counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="request",outcome="answered"');
  const marked = await b!.api('GET', '/acme/repos', { headers: { 'x-repohost-hop': other } });
  t.equal(marked.status, 503, 'a stale request route is 503');
  t.ok(Number(marked.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(marked.json.error.details.reason, 'stale_route');
  t.equal(counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="request",outcome="answered"'), before, 'b forwarded nothing');
  t.equal(counter(await b!.metrics(), 'repohost_stale_route_refusals_total', 'kind="request"'), 1);

  // e proxies a request for the org's shard to b, which no longer owns it: b refuses, e relays
  // the 503 and counts it stale; nothing goes on to a.
  const fromE = await e!.api('GET', '/acme/repos');
  t.equal(fromE.status, 503, 'a stale proxied route is 503');
  t.ok(Number(fromE.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(fromE.json.error.details.reason, 'stale_route');
  t.equal(counter(await e!.metrics(), 'repohost_forwarded_total', 'kind="request",outcome="stale_route"'), 1, 'e counted it stale');
  t.equal(counter(await b!.metrics(), 'repohost_stale_route_refusals_total', 'kind="request"'), 2, 'b refused it');
  t.equal(counter(await a!.metrics(), 'repohost_stale_route_refusals_total', 'kind="request"'), 0, 'a never saw it');

  // A restricted token's names are read from the org's shard wherever `/whoami` is served: b
  // gathers them from a; e asks b, which refuses the batch whole, and e answers 503.
  const named = { repos: ['acme/stale'] };
  const throughB = await b!.api('GET', '/whoami', { token: await b!.token(named) });
  t.same({ status: throughB.status, ids: throughB.json.repo_ids }, { status: 200, ids: [] }, 'b read the name index from a');
  t.equal(counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="read",outcome="answered"'), 1, 'in one gather');
  const throughE = await e!.api('GET', '/whoami', { token: await e!.token(named) });
  t.equal(throughE.status, 503, 'a stale read route is 503');
  t.ok(Number(throughE.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(throughE.json.error.details.reason, 'stale_route');
  t.equal(counter(await e!.metrics(), 'repohost_forwarded_total', 'kind="read",outcome="stale_route"'), 1, 'e counted it stale');
  t.equal(counter(await b!.metrics(), 'repohost_stale_route_refusals_total', 'kind="read"'), 1, 'b refused it');
});

t.test('a stopped owner: the message sent to it fails within the lease TTL', async (t) => {
  // `c` owns only the org's shard, `d` every other: a repository create's step goes to `d`.
  const orgOnly = (orgId: string): Record<string, string> => ({ default: 'd', [String(orgShard(orgId))]: 'c' });
  const cluster = await startCluster(t, { log: 'etcd', leaseTtlS: 5, fixedPlacement: { c: orgOnly, d: orgOnly } });
  await cluster.settled();
  const [c, d] = cluster.nodes;
  t.equal((await c!.api('POST', '/acme/repos', { body: { name: 'before' } })).status, 201, 'a create whose step runs on d');
  d!.process.kill('SIGSTOP');
  t.teardown(() => void d!.process.kill('SIGCONT'));
  const started = Date.now();
  const made = await c!.api('POST', '/acme/repos', { body: { name: 'during' } });
  const waited = Date.now() - started;
  t.equal(made.status, 503, `503 while d is stopped (${made.text})`);
  t.ok(Number(made.headers.get('retry-after')) >= 1, 'with Retry-After');
  // The saga's step and then its compensation each wait for a session to d to miss its pings.
  t.ok(waited < 12_000, `answered after ${waited} ms (lease TTL 5 s, two messages)`);
  // Stopped past its lease (5 s): on resuming, d must not serve what it may have lost, and
  // leaves (self-fence, exit 75); c answers 503 for it rather than waiting.
  await new Promise((r) => setTimeout(r, Math.max(0, started + 6_000 - Date.now())));
  const exited = new Promise<number | null>((resolve) => d!.process.once('exit', (code) => resolve(code)));
  d!.process.kill('SIGCONT');
  const after = await c!.api('GET', '/acme/before');
  t.not(after.status, 200, `no answer from d after the resume (${after.status})`);
  t.equal(d!.process.exitCode ?? (await exited), 75, 'd left on its lost lease');
});
