import t from 'tap';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiAnswers, populate, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { allOwnedBy, startForwardNodes } from '../helpers/forward-nodes.js';
import { cloneUrl, gitClient } from '../git/helpers.js';
import { orgShard } from '../../src/storage/shards.js';

// Forwarding between nodes (docs/design.md, "Forwarding"): real repohost processes in cluster
// mode whose placement is a fixed table per node (the test seam until the control plane places
// shards). Node `a` owns every shard; every request goes through `b`, which owns none.

const git = gitClient(t);

function counter(metrics: string, name: string, labels: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('through a node that owns nothing, the API answers as the owner does', async (t) => {
  const [a, b] = await startForwardNodes(t, [{ id: 'a', owners: allOwnedBy('a') }, { id: 'b', owners: allOwnedBy('a') }], SCENARIO_ENV);
  await populate(b!, 2);

  // A blob uploaded through `b` in chunks, with no declared length: streamed to `a`, staged there.
  const content = Buffer.alloc(3 * 1024 * 1024 + 17, 'x');
  const token = await b!.token();
  const upload = await fetch(`${b!.url}/v1/acme/r1/blobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
    body: new ReadableStream({
      start(c) {
        for (let i = 0; i < content.length; i += 256 * 1024) c.enqueue(content.subarray(i, i + 256 * 1024));
        c.close();
      },
    }),
    duplex: 'half',
  });
  t.equal(upload.status, 201, 'the chunked upload is stored');
  t.equal(upload.headers.get('x-repohost-node'), 'a', 'the reply names the owner');
  const blob = (await upload.json()) as { oid: string };
  const gitOid = createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
  t.equal(blob.oid, gitOid, 'the blob is the bytes sent');
  const main = (await b!.api('GET', '/acme/r1/bookmarks/main')).json.change_id as string;
  const wrote = await b!.api('POST', '/acme/r1/apply-ops', { body: { base_change_id: main, message: 'big', ops: [{ op: 'write', path: 'big.bin', blob_oid: blob.oid }], bookmarks: [{ name: 'main' }] } });
  t.equal(wrote.status, 201, `apply-ops references the blob (${wrote.text.slice(0, 200)})`);

  // A git push through `b`, then a clone through `b` sees it.
  const dir = join(git.dir, 'work');
  t.equal((await git.run(['clone', '--quiet', cloneUrl(b!, 'r0', token), dir])).status, 0, 'clone through b');
  writeFileSync(join(dir, 'pushed.txt'), 'pushed through b\n');
  await git.ok(['add', '-A'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'through b'], { cwd: dir });
  const pushed = await git.run(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  t.equal(pushed.status, 0, `push through b (${pushed.stderr})`);
  const read = await b!.api('GET', '/acme/r0/content?path=pushed.txt');
  t.equal(read.status, 200, 'the pushed file is read through b');
  t.equal(Buffer.from(read.json.content, 'base64').toString(), 'pushed through b\n');

  const viaB = await apiAnswers(b!);
  const viaA = await apiAnswers(a!);
  t.same(viaB, viaA, 'every answer through b is the owner’s own');
  t.ok(Object.keys(viaA).length > 30, `${Object.keys(viaA).length} answers compared`);

  const direct = await a!.api('GET', '/acme/r0');
  t.equal(direct.headers.get('x-repohost-node'), 'a', 'the owner names itself');
  const metrics = await b!.metrics();
  t.ok(counter(metrics, 'repohost_forwarded_total', 'kind="request",outcome="answered"') > 50, 'b counted the requests it forwarded');
  t.match(metrics, /repohost_forward_seconds_bucket\{le="[^"]+",kind="request"\}/, 'and their latency');
  t.equal(counter(await a!.metrics(), 'repohost_forwarded_total', 'kind="request",outcome="answered"'), 0, 'a forwarded nothing');
});

t.test('a stale route gets 503 with Retry-After and never a second hop', async (t) => {
  // Each node believes the other owns every shard, except the org's shard, which both give to `a`.
  let org = '';
  const [a, b] = await startForwardNodes(t, [
    { id: 'a', owners: (orgId) => ({ default: 'b', [(org = String(orgShard(orgId)))]: 'a' }) },
    { id: 'b', owners: (orgId) => ({ default: 'a', [String(orgShard(orgId))]: 'a' }) },
  ]);

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
});
