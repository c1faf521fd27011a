import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiAnswers, createScenarioRepo, DEAD_UPSTREAM, populate, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { allOwnedBy, startCluster, type TestNode } from '../helpers/cluster.js';
import type { EngineCluster } from '../helpers/cluster-engines.js';
import { startDelayProxy, type DelayProxy } from '../helpers/delay-proxy.js';
import { startGitServer } from '../helpers/git-server.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { cloneUrl, gitClient } from '../git/helpers.js';

// Forwarding between nodes (docs/design.md, "Forwarding"): real repohost processes in cluster
// mode whose placement is a fixed table per node (the test seam until the control plane places
// shards): one node owning every shard, requests through another that owns none; then the
// shards split between two nodes.

const git = gitClient(t);

function counter(metrics: string, name: string, labels: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('through a node that owns nothing, the API answers as the owner does', async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', fixedPlacement: { a: allOwnedBy('a'), b: allOwnedBy('a') }, env: SCENARIO_ENV });
  await cluster.settled();
  const [a, b] = cluster.nodes;
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

  // With the owner gone, b answers 503 with Retry-After, not a 5xx of its own.
  await a!.kill();
  const gone = await b!.api('GET', '/acme/r0/bookmarks');
  t.equal(gone.status, 503, 'an unreachable owner is 503');
  t.equal(gone.json.error.details.reason, 'owner_unreachable');
  t.ok(Number(gone.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="request",outcome="unreachable"'), 1, 'counted unreachable');
});

t.test('shards split between two nodes: each answers as the other', async (t) => {
  // `a` owns the even shards, `b` the odd ones, in both views.
  const split = (): Record<string, string> => Object.fromEntries([['default', 'a'], ...Array.from({ length: 128 }, (_, i) => [String(2 * i + 1), 'b'])]);
  // Each node reaches etcd through proxies (no delay until a test sets one): a node's watch of the
  // org directory can then be held behind another's writes. The shard log is JetStream, so that
  // holding etcd back does not hold the writes back too.
  const etcdProxies = new Map<string, DelayProxy[]>();
  const etcdVia = async (etcd: EngineCluster, id: string): Promise<string[]> => {
    const proxies: DelayProxy[] = [];
    for (const endpoint of etcd.endpoints) {
      const member = new URL(endpoint);
      const proxy = await startDelayProxy({ targetHost: member.hostname, targetPort: Number(member.port) });
      t.teardown(() => proxy.stop());
      proxies.push(proxy);
    }
    etcdProxies.set(id, proxies);
    return proxies.map((p) => `http://${p.address}`);
  };
  const cluster = await startCluster(t, { log: 'jetstream', fixedPlacement: { a: split, b: split }, env: SCENARIO_ENV, etcdVia });
  await cluster.settled();
  const [a, b] = cluster.nodes;
  await createSpread(b!, ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'], (name) => createScenarioRepo(b!, name));
  await populate(b!, 6, true);
  const viaB = await apiAnswers(b!);
  const viaA = await apiAnswers(a!);
  t.same(viaB, viaA, 'every answer is the same through either node');
  await orgReadsGathered(t, [a!, b!]);
  await syncRunsMerged(t, [a!, b!]);
  await pushesRunOnce(t, [a!, b!]);
  await deliveriesMerged(t, [a!, b!]);
  await targetsHeardAtOnce(t, [a!, b!], etcdProxies);
  await repeatsAfterRename(t, [a!, b!]);
  // Each repository read by name, through both nodes.
  for (const repo of ['r0', 'r1', 'r2', 'r3', 'r4', 'r5']) {
    for (const path of ['', '/bookmarks', '/changes?bookmark=main&limit=200', '/content?depth=10', '/content?path=a.txt', '/upstream/syncs']) {
      const [fromA, fromB] = await Promise.all([a!.api('GET', `/acme/${repo}${path}`), b!.api('GET', `/acme/${repo}${path}`)]);
      t.equal(fromA.status, 200, `GET ${repo}${path}`);
      t.same(fromB.json, fromA.json, `GET ${repo}${path} is the same through b`);
      t.equal(fromB.headers.get('x-repohost-node'), fromA.headers.get('x-repohost-node'), 'both name the same owner');
    }
  }
  const actorForwards = counter(await a!.metrics(), 'repohost_forwarded_total', 'kind="actor",outcome="answered"') + counter(await b!.metrics(), 'repohost_forwarded_total', 'kind="actor",outcome="answered"');
  t.ok(actorForwards > 0, `${actorForwards} actor messages went to another shard's owner`);
});

/**
 * Creates the repositories `names` through `node` so that both nodes hold some. Ids are random, so
 * six can all land on one node (about 3 % of runs): the last is then deleted and created again,
 * with a new id, until they do not.
 */
async function createSpread(node: TestNode, names: string[], create: (name: string) => Promise<unknown>): Promise<void> {
  for (const name of names) await create(name);
  const last = names.at(-1)!;
  for (let attempt = 0; ; attempt++) {
    const { repos } = await owners(node, names);
    if (new Set([...repos.values()].map((r) => r.node)).size > 1) return;
    if (attempt === 20) throw new Error(`${names.join(', ')} stayed on one node`);
    const deleted = await node.api('DELETE', `/acme/${last}`);
    if (deleted.status !== 200) throw new Error(`delete ${last}: ${deleted.status} ${deleted.text}`);
    await create(last);
  }
}

/** Which node serves each of the org's repositories, and which the org itself. */
async function owners(node: TestNode, names: string[]): Promise<{ org: string; repos: Map<string, { id: string; node: string }> }> {
  const org = (await node.api('GET', '/acme')).headers.get('x-repohost-node')!;
  const repos = new Map<string, { id: string; node: string }>();
  for (const name of names) {
    const got = await node.api('GET', `/acme/${name}`);
    repos.set(name, { id: got.json.id as string, node: got.headers.get('x-repohost-node')! });
  }
  return { org, repos };
}

/**
 * The org-level reads over repositories on both nodes (six repositories `r0`…`r5`, newest last):
 * the same answers through either node as one node holding them all gives.
 */
async function orgReadsGathered(t: Test, nodes: TestNode[]): Promise<void> {
  const names = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
  const { org, repos } = await owners(nodes[0]!, names);
  t.same(new Set([...repos.values()].map((r) => r.node)), new Set(['a', 'b']), 'the repositories are on both nodes');
  const newestFirst = [...names].reverse();
  for (const node of nodes) {
    const via = `through ${node.id}`;
    const list = await node.api('GET', '/acme/repos?limit=100');
    t.same(list.json.repos.map((r: { name: string }) => r.name), newestFirst, `the list has every repository, newest first, ${via}`);
    t.equal(list.json.repos[5].upstream.latest_sync.status, 'failed', `with r0's latest sync ${via}`);
    t.ok(list.json.repos.every((r: { head_change_id: string }) => r.head_change_id !== 'z'.repeat(32)), `and each head ${via}`);
    t.equal((await node.api('GET', '/acme')).json.num_repos, 6, `the org counts them ${via}`);
    // Cursor pages of two: the same repositories in the same order, and the same cursors.
    const paged: unknown[] = [];
    let cursor = '';
    for (let pages = 0; pages < 4; pages++) {
      const page = await node.api('GET', `/acme/repos?limit=2${cursor}`);
      paged.push(...page.json.repos);
      if (!page.json.has_more) break;
      cursor = `&cursor=${encodeURIComponent(page.json.next_cursor as string)}`;
    }
    t.same(paged, list.json.repos, `cursor pages of two add up to the list ${via}`);
    const numbered = await node.api('GET', '/acme/repos/list?page=2&pageSize=4&sortBy=name&sortOrder=asc');
    t.same({ names: numbered.json.repos.map((r: { name: string }) => r.name), total: numbered.json.total, pages: numbered.json.total_pages }, { names: ['r4', 'r5'], total: 6, pages: 2 }, `numbered pages by name ${via}`);
    const filtered = await node.api('GET', '/acme/repos/list?pageSize=100&sortBy=created_at&sortOrder=asc');
    t.equal(filtered.json.repos[0].upstream.status, 'error', `r0's list item shows its failed sync ${via}`);
    // Only r0 has an upstream: the org's runs are its syncs (the scheduler may add one meanwhile).
    let runs = await node.api('GET', '/acme/sync-runs');
    for (let tries = 0; tries < 3; tries++) {
      const own = await node.api('GET', '/acme/r0/upstream/syncs');
      if (JSON.stringify(own.json.syncs.map((s: { id: string }) => s.id)) === JSON.stringify(runs.json.sync_runs.map((r: { id: string }) => r.id))) break;
      runs = await node.api('GET', '/acme/sync-runs');
    }
    const own = await node.api('GET', '/acme/r0/upstream/syncs');
    t.same(runs.json.sync_runs.map((r: { id: string }) => r.id), own.json.syncs.map((s: { id: string }) => s.id), `the org's sync runs are r0's ${via}`);
    t.ok(runs.json.sync_runs.length >= 1 && runs.json.sync_runs.every((r: { repo_id: string }) => r.repo_id === repos.get('r0')!.id), `and there are some ${via}`);
    const byName = await node.api('GET', '/acme/sync-runs?repo=r0');
    t.same(byName.json.sync_runs, runs.json.sync_runs, `r0's sync runs ${via}`);
    t.same((await node.api('GET', '/acme/sync-runs?repo=r1')).json.sync_runs, [], `none for r1 ${via}`);
  }

  // A token restricted by name to repositories on both nodes, the org's owner's included or not.
  const elsewhere = names.filter((n) => repos.get(n)!.node !== org);
  const mine = names.find((n) => repos.get(n)!.node === org);
  const claimed = [elsewhere[0]!, ...(mine ? [mine] : [])];
  const claimedIds = claimed.map((n) => repos.get(n)!.id);
  const outside = names.find((n) => !claimed.includes(n))!;
  for (const node of nodes) {
    const via = `through ${node.id}`;
    const token = await node.token({ repos: claimed.map((n) => `acme/${n}`) });
    const whoami = await node.api('GET', '/whoami', { token });
    t.same([...whoami.json.repo_ids].sort(), [...claimedIds].sort(), `whoami resolves the names on every node ${via}`);
    t.equal((await node.api('GET', '/acme', { token })).json.num_repos, claimed.length, `the org counts what it reaches ${via}`);
    const list = await node.api('GET', '/acme/repos?limit=100', { token });
    t.same(list.json.repos.map((r: { name: string }) => r.name).sort(), [...claimed].sort(), `the list shows what it reaches ${via}`);
    const target = await node.api('POST', '/acme/webhook-targets', { token, body: { url: 'http://127.0.0.1:9/hook', repo_ids: [repos.get(elsewhere[0]!)!.id] } });
    t.equal(target.status, 201, `it may watch a repository on another node ${via} (${target.text.slice(0, 200)})`);
    t.equal((await node.api('GET', `/acme/webhook-targets/${target.json.id}`, { token })).status, 200, `and read that target ${via}`);
    const refused = await node.api('POST', '/acme/webhook-targets', { token, body: { url: 'http://127.0.0.1:9/hook', repo_ids: [repos.get(outside)!.id] } });
    t.equal(refused.status, 403, `not one outside its reach ${via}`);
    const ids = await node.token({ repo_ids: [repos.get(elsewhere[0]!)!.id] });
    t.same((await node.api('GET', '/whoami', { token: ids })).json.repo_ids, [repos.get(elsewhere[0]!)!.id], `an id claim on another node's shard ${via}`);
  }
}

/**
 * Each node holds a copy of every shard here (two nodes, three replicas), sync queues included:
 * a push runs on its repository's owner only, and once, whichever node the request entered
 * through, although the other node's scheduler looks at its queue while the push is under way
 * (a push of its own is queued meanwhile). Each run asks the upstream for its refs once, so the
 * upstream counts the runs.
 */
async function pushesRunOnce(t: Test, nodes: TestNode[]): Promise<void> {
  const names = Array.from({ length: 6 }, (_, i) => `pushed${i}`);
  await createSpread(nodes[0]!, names, async (name) => t.equal((await nodes[0]!.api('POST', '/acme/repos', { body: { name } })).status, 201, `${name} created`));
  const { repos } = await owners(nodes[0]!, names);
  const git = await startGitServer({});
  t.teardown(() => git.close());
  // One repository per node, each entered through the other node.
  const pushed = nodes.map((node) => ({ name: names.find((n) => repos.get(n)!.node === node.id)!, via: nodes.find((n) => n !== node)! }));
  for (const { name, via } of pushed) {
    t.equal((await via.api('PATCH', `/acme/${name}`, { body: { upstream: { url: await git.createRepo(name) } } })).status, 200, `${name} gets an upstream`);
    const change = await via.api('POST', `/acme/${name}/apply-ops`, { body: { base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] } });
    t.equal(change.status, 201, `${name} has a change on main`);
  }
  const [first, second] = pushed;
  const hold = git.hold((req) => req.service === 'git-receive-pack' && req.path.includes(`/${first!.name}.git`));
  const ids = new Map<string, string>();
  const queue = async ({ name, via }: { name: string; via: TestNode }): Promise<void> => {
    const push = await via.api('POST', `/acme/${name}/push`);
    t.equal(push.status, 201, `${name}'s push queued through ${via.id}, not its owner`);
    ids.set(name, push.json.id as string);
  };
  await queue(first!);
  await hold.held;
  // The other node's scheduler runs its own push now, and looks at its whole queue to find it.
  await queue(second!);
  await new Promise((r) => setTimeout(r, 1000));
  hold.release();
  for (const { name, via } of pushed) {
    let status = '';
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
      status = (await via.api('GET', `/acme/${name}/upstream/syncs/${ids.get(name)}`)).json.status as string;
      if (status === 'completed' || status === 'failed') break;
    }
    t.equal(status, 'completed', `${name}'s push completed`);
  }
  for (const { name } of pushed) {
    const runs = git.requests.filter((r) => r.method === 'GET' && r.service === 'git-receive-pack' && r.path.includes(`/${name}.git`)).length;
    t.equal(runs, 1, `${name}'s push ran once against the upstream`);
  }
}

/**
 * A repository write under an Idempotency-Key, repeated by its old path after the repository was
 * renamed and then deleted, replays through either node: the name no longer resolves, so the
 * org's owner serves the repeat, and the stored response is on the repository's shard, which the
 * other node owns.
 */
async function repeatsAfterRename(t: Test, nodes: TestNode[]): Promise<void> {
  const names = Array.from({ length: 8 }, (_, i) => `moved${i}`);
  await createSpread(nodes[0]!, names, async (name) => t.equal((await nodes[0]!.api('POST', '/acme/repos', { body: { name } })).status, 201, `${name} created`));
  const { org, repos } = await owners(nodes[0]!, names);
  const name = names.find((n) => repos.get(n)!.node !== org)!;
  t.ok(name, 'a repository off the org owner\'s shards');
  const headers = { 'idempotency-key': 'repeat-after-rename' };
  const bookmark = { name: 'once', change_id: 'z'.repeat(32) };
  const first = await nodes[0]!.api('POST', `/acme/${name}/bookmarks`, { body: bookmark, headers });
  t.equal(first.status, 201, 'the write');
  t.equal((await nodes[0]!.api('PATCH', `/acme/${name}`, { body: { name: `${name}-renamed` } })).status, 200, 'renamed');
  for (const node of nodes) {
    const again = await node.api('POST', `/acme/${name}/bookmarks`, { body: bookmark, headers });
    t.same([again.status, again.text], [201, first.text], `the repeat by the old name replays through ${node.id}`);
  }
  t.equal((await nodes[0]!.api('DELETE', `/acme/${name}-renamed`)).status, 200, 'deleted');
  for (const node of nodes) {
    const again = await node.api('POST', `/acme/${name}/bookmarks`, { body: bookmark, headers });
    t.same([again.status, again.text], [201, first.text], `and replays after the delete through ${node.id}`);
    const unknown = await node.api('POST', `/acme/${name}/bookmarks`, { body: bookmark, headers: { 'idempotency-key': 'never-used' } });
    t.equal(unknown.status, 404, `a key never used there is 404 through ${node.id}`);
  }
}

/** The id of every item of a cursor-paged list, page by page (`limit` a page). */
async function pagedIds(node: TestNode, path: string, items: string, limit: number, token?: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor = '';
  for (let pages = 0; pages < 50; pages++) {
    const page = await node.api('GET', `${path}${path.includes('?') ? '&' : '?'}limit=${limit}${cursor}`, token ? { token } : {});
    if (page.status !== 200) throw new Error(`GET ${path}: ${page.status} ${page.text}`);
    ids.push(...page.json[items].map((item: { id: string }) => item.id));
    if (!page.json.has_more) return ids;
    cursor = `&cursor=${encodeURIComponent(page.json.next_cursor as string)}`;
  }
  throw new Error(`GET ${path}: more than 50 pages`);
}

/**
 * Sync runs of repositories on both nodes (each node's shards list the syncs of their own
 * repositories): the org's list merges them newest first, in cursor pages too, through either
 * node, and a restricted token or a `repo` filter sees only its repositories' syncs.
 */
async function syncRunsMerged(t: Test, nodes: TestNode[]): Promise<void> {
  const names = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
  const { org, repos } = await owners(nodes[0]!, names);
  for (const name of names.slice(1)) t.equal((await nodes[0]!.api('PATCH', `/acme/${name}`, { body: { upstream: { url: DEAD_UPSTREAM } } })).status, 200, `${name} gets an upstream`);
  // Two syncs each, enqueued round-robin so that the org's order interleaves the repositories.
  for (let round = 0; round < 2; round++) {
    for (const name of names) {
      const sync = await nodes[round]!.api('POST', `/acme/${name}/upstream/syncs`, { body: { direction: 'pull' } });
      t.equal(sync.status, 201, `a sync of ${name}`);
    }
  }
  const byRepo = new Map<string, string[]>();
  for (const name of names) byRepo.set(name, await pagedIds(nodes[0]!, `/acme/${name}/upstream/syncs`, 'syncs', 200));
  const all = [...byRepo.values()].flat().sort().reverse();
  t.equal(all.length, 13, 'thirteen syncs (r0 had one)');
  const elsewhere = names.find((n) => repos.get(n)!.node !== org)!;
  for (const node of nodes) {
    const via = `through ${node.id}`;
    const list = await node.api('GET', '/acme/sync-runs?limit=100');
    t.same(list.json.sync_runs.map((r: { id: string }) => r.id), all, `every repository's syncs, newest first, ${via}`);
    t.same(await pagedIds(node, '/acme/sync-runs', 'sync_runs', 3), all, `cursor pages of three add up to the list ${via}`);
    t.same(await pagedIds(node, '/acme/sync-runs', 'sync_runs', 1), all, `and pages of one ${via}`);
    t.same(await pagedIds(node, `/acme/sync-runs?repo=${elsewhere}`, 'sync_runs', 1), byRepo.get(elsewhere), `${elsewhere}'s, on a node the org is not on, ${via}`);
    const token = await node.token({ repos: [`acme/${elsewhere}`] });
    t.same(await pagedIds(node, '/acme/sync-runs', 'sync_runs', 1, token), byRepo.get(elsewhere), `a token restricted to ${elsewhere} sees its syncs only, page by page, ${via}`);
  }
}

/** The target's delivery log through `node`, polled until `done` holds for it (newest first). */
async function deliveryLog(node: TestNode, targetId: string, done: (log: Array<{ id: string; status: string; attempts: number }>) => boolean): Promise<Array<{ id: string; status: string; attempts: number }>> {
  for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const res = await node.api('GET', `/acme/webhook-targets/${targetId}/deliveries?limit=100`);
    if (res.status !== 200) throw new Error(`GET deliveries: ${res.status} ${res.text}`);
    if (done(res.json.deliveries)) return res.json.deliveries;
    if (Date.now() > deadline) throw new Error(`the delivery log never matched: ${res.text.slice(0, 2000)}`);
  }
}

/**
 * A target's deliveries are kept on the shards of the repositories whose events they carry, each
 * shard's on its owner only: the log lists them all newest first, in cursor pages too, through
 * either node, and a delivery on the shard the org's owner does not hold is redelivered (or
 * refused while its owner still retries it) as on one node.
 */
async function deliveriesMerged(t: Test, nodes: TestNode[]): Promise<void> {
  const names = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
  const { org, repos } = await owners(nodes[0]!, names);
  const elsewhere = names.find((n) => repos.get(n)!.node !== org)!;
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const target = async (path: string, watched: string[]): Promise<string> => {
    const made = await nodes[0]!.api('POST', '/acme/webhook-targets', { body: { url: receiver.url(path), events: ['repo.updated'], repo_ids: watched.map((n) => repos.get(n)!.id) } });
    t.equal(made.status, 201, `a target at ${path}`);
    receiver.setSecret(path, made.json.secret as string);
    return made.json.id as string;
  };
  const hook = await target('/hook', names);
  const down = await target('/down', [elsewhere]);
  receiver.behave('/down', () => ({ status: 503 }));
  for (let round = 0; round < 2; round++) {
    for (const name of names) t.equal((await nodes[round]!.api('PATCH', `/acme/${name}`, { body: { tags: { round: String(round) } } })).status, 200, `${name} updated`);
  }
  await receiver.waitFor(() => receiver.unique('/hook').length === 12, 30_000, 'twelve deliveries');
  const sent = receiver.unique('/hook').map((d) => d.headers['x-svc-delivery'] as string);
  const all = [...sent].sort().reverse();
  for (const node of nodes) {
    const via = `through ${node.id}`;
    const log = await deliveryLog(node, hook, (l) => l.length === 12 && l.every((d) => d.status === 'succeeded'));
    t.same(log.map((d) => d.id), all, `every repository's deliveries, newest first, ${via}`);
    t.same(await pagedIds(node, `/acme/webhook-targets/${hook}/deliveries`, 'deliveries', 5), all, `cursor pages of five add up to the log ${via}`);
  }

  // Redelivered through each node: the org's owner reads the original from its shard's owner.
  const original = (await deliveryLog(nodes[0]!, hook, () => true)).find((d) => receiver.unique('/hook').some((r) => r.headers['x-svc-delivery'] === d.id && r.body.repository.name === elsewhere))!;
  const redone: string[] = [];
  for (const node of nodes) {
    const redo = await node.api('POST', `/acme/webhook-targets/${hook}/deliveries/${original.id}/redeliver`);
    t.equal(redo.status, 201, `a delivery of ${elsewhere}, on the shard ${org} does not hold, is redelivered through ${node.id} (${redo.text.slice(0, 200)})`);
    redone.push(redo.json.id as string);
  }
  await receiver.waitFor(() => receiver.unique('/hook').length === 14, 30_000, 'the redeliveries');
  const event = (id: string): unknown => receiver.unique('/hook').find((r) => r.headers['x-svc-delivery'] === id)!.body;
  t.same(redone.map(event), [event(original.id), event(original.id)], 'both resend the original event');
  const log = await deliveryLog(nodes[1]!, hook, (l) => l.length === 14 && l.every((d) => d.status === 'succeeded'));
  t.same(log.map((d) => d.id), [...redone].reverse().concat(all), 'the redeliveries head the log');
  const unknown = await nodes[1]!.api('POST', `/acme/webhook-targets/${hook}/deliveries/dlv_${'0'.repeat(26)}/redeliver`);
  t.equal(unknown.status, 404, 'an unknown delivery is not found');

  // Still retried by its shard's owner (the lane's second waits behind the first): no redelivery yet.
  const pending = (await deliveryLog(nodes[0]!, down, (l) => l.length === 2 && l.some((d) => d.attempts >= 1))).find((d) => d.attempts >= 1)!;
  t.equal(pending.status, 'pending', 'a delivery its receiver refused waits for its retry');
  const refused = await nodes[0]!.api('POST', `/acme/webhook-targets/${down}/deliveries/${pending.id}/redeliver`);
  t.same({ status: refused.status, code: refused.json.error.code }, { status: 409, code: 'ABORTED' }, 'a pending delivery on the other node is not redelivered');
}

/**
 * A target created through the org's owner hears of a write made right after its 201 on the other
 * node, although that node's threads may not have the target in their view yet (the directory's
 * watch latency): the other node keeps the event, and its fan-out catches up with etcd first.
 */
async function targetsHeardAtOnce(t: Test, nodes: TestNode[], etcdProxies: Map<string, DelayProxy[]>): Promise<void> {
  const names = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
  const { org, repos } = await owners(nodes[0]!, names);
  const creator = nodes.find((n) => n.id === org)!;
  const writer = nodes.find((n) => n.id !== org)!;
  // The writer hears of etcd's changes 100 ms late: the window in which it has no target yet.
  const held = etcdProxies.get(writer.id)!;
  for (const proxy of held) proxy.setDelay(100);
  const far = names.find((n) => repos.get(n)!.node === writer.id)!;
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const rounds = 10;
  for (let i = 0; i < rounds; i++) {
    const path = `/fresh${i}`;
    const made = await creator.api('POST', '/acme/webhook-targets', { body: { url: receiver.url(path), events: ['repo.updated'], repo_ids: [repos.get(far)!.id] } });
    t.equal(made.status, 201, `target ${i} made through ${creator.id}`);
    receiver.setSecret(path, made.json.secret as string);
    const res = await writer.api('PATCH', `/acme/${far}`, { body: { tags: { fresh: String(i) } } });
    t.equal(res.status, 200, `${far} updated through ${writer.id}, its owner`);
  }
  for (const proxy of held) proxy.setDelay(0);
  // Target i hears writes i to the last, each once, in order.
  const expected = (i: number): string[] => Array.from({ length: rounds - i }, (_, k) => String(i + k));
  const complete = (): boolean => Array.from({ length: rounds }, (_, i) => receiver.unique(`/fresh${i}`).length === rounds - i).every(Boolean);
  await receiver.waitFor(complete, 30_000, 'every delivery to the new targets').catch(() => undefined);
  for (let i = 0; i < rounds; i++) {
    t.same(receiver.unique(`/fresh${i}`).map((d) => d.body.data.after.tags.fresh), expected(i), `target ${i} heard of the write made right after its creation, and of the later ones`);
  }
}

