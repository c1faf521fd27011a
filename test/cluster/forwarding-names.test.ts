import t from 'tap';
import { orgShard } from '../../src/storage/shards.js';
import { startCluster, type TestNode } from '../helpers/cluster.js';
import { ROOT } from '../helpers/replica-scenarios.js';

// An entry node that does not own the org's shard remembers the repository ids its clients'
// requests resolved to, and sends the next request of that name straight to the repository's owner — or
// serves it itself (src/cluster/forward/request-forwarder.ts). Renames, deletions and a new
// repository under an old name must still be answered as the org's owner would.

/** Requests `node` proxied to another node so far. */
async function proxied(node: TestNode): Promise<number> {
  const line = (await node.metrics()).split('\n').find((l) => l.startsWith('repohost_forwarded_total{kind="request",outcome="answered"}'));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('requests by a remembered name skip the org owner, and stale names are asked again', async (t) => {
  // `a` owns the even shards and the org's, `b` the odd ones: clients enter through `b`.
  const owners = (orgId: string): Record<string, string> => ({ ...Object.fromEntries(Array.from({ length: 128 }, (_, i) => [String(2 * i + 1), 'b'])), default: 'a', [String(orgShard(orgId))]: 'a' });
  const cluster = await startCluster(t, { log: 'etcd', fixedPlacement: { a: owners, b: owners } });
  await cluster.settled();
  const [a, b] = cluster.nodes;
  const where = new Map<string, { id: string; node: string }>();
  for (let i = 0; where.size < 12 && i < 12; i++) {
    const made = await b!.api('POST', '/acme/repos', { body: { name: `n${i}` } });
    t.equal(made.status, 201, `create n${i}`);
    const read = await b!.api('GET', `/acme/n${i}`);
    where.set(`n${i}`, { id: made.json.id as string, node: read.headers.get('x-repohost-node')! });
  }
  const onB = [...where].find(([, w]) => w.node === 'b');
  const onA = [...where].find(([, w]) => w.node === 'a');
  if (!onB || !onA) return t.fail(`the repositories are on both nodes: ${JSON.stringify([...where])}`);
  const [nameB, repoB] = onB;
  const [nameA] = onA;

  // Read once (learned), then again: b serves its own repository without a hop.
  t.notOk((await b!.api('GET', `/acme/${nameB}`)).headers.has('x-repohost-repo'), 'the resolved id stays between the nodes');
  const before = await proxied(b!);
  for (let i = 0; i < 5; i++) {
    const read = await b!.api('GET', `/acme/${nameB}/bookmarks`);
    t.equal(read.status, 200);
    t.equal(read.headers.get('x-repohost-node'), 'b');
  }
  t.equal(await proxied(b!), before, `reads of ${nameB} through b took no hop`);
  // Writes too (with a buffered body): served by b at once, not sent to the org's owner and back.
  for (let i = 0; i < 3; i++) t.equal((await b!.api('POST', `/acme/${nameB}/bookmarks`, { body: { name: `w${i}`, change_id: ROOT } })).status, 201, `write ${i} to ${nameB} through b`);
  t.equal(await proxied(b!), before, `writes to ${nameB} through b took no hop`);
  // File writes stream their bodies: a small one is taken whole and served by b at once too; a
  // large one still goes through the org's owner (a stale name could not send it again).
  const fileWrite = (name: string, path: string, content: string) =>
    b!.api('POST', `/acme/${name}/apply-ops`, { body: { base_change_id: ROOT, ops: [{ op: 'write', path, content }] } });
  for (let i = 0; i < 3; i++) t.equal((await fileWrite(nameB, `f${i}.txt`, 'small')).status, 201, `file write ${i} to ${nameB} through b`);
  t.equal(await proxied(b!), before, `file writes to ${nameB} through b took no hop`);
  t.equal((await fileWrite(nameB, 'large.txt', 'x'.repeat(300 * 1024))).status, 201, `a large file write to ${nameB} through b`);
  t.equal((await proxied(b!)) - before, 1, 'went through the org owner');
  // A repository on a: one hop straight to it, as many as reads.
  await b!.api('GET', `/acme/${nameA}`);
  const beforeA = await proxied(b!);
  for (let i = 0; i < 3; i++) t.equal((await b!.api('GET', `/acme/${nameA}/bookmarks`)).status, 200);
  t.equal((await proxied(b!)) - beforeA, 3, `each read of ${nameA} is one proxied request`);
  // A missing file is the owner's own 404, not a reason to ask again.
  const missing = await b!.api('GET', `/acme/${nameA}/content?path=nothing-here`);
  t.equal(missing.status, 404);
  t.not(missing.json.error.code, 'REPO_NOT_FOUND', `the 404 is about the path (${missing.json.error.code})`);

  // Renamed through a: b's remembered name is stale. A write by it is asked again through the
  // org's owner, which knows no such name, and the renamed repository does not get it.
  t.equal((await a!.api('PATCH', `/acme/${nameB}`, { body: { name: 'moved' } })).status, 200, 'rename through a');
  const staleFile = await fileWrite(nameB, 'stale.txt', 'small');
  t.equal(staleFile.status, 404, `a file write by the old name (its body sent twice) through b is not found (${staleFile.text})`);
  t.equal(staleFile.json.error.code, 'REPO_NOT_FOUND');
  const stale = await b!.api('POST', `/acme/${nameB}/bookmarks`, { body: { name: 'stale', change_id: ROOT } });
  t.equal(stale.status, 404, `a write by the old name through b is not found (${stale.text})`);
  t.equal((await a!.api('GET', '/acme/moved/bookmarks/stale')).status, 404, 'and the renamed repository did not take it');
  const old = await b!.api('GET', `/acme/${nameB}`);
  t.equal(old.status, 404, 'the old name is gone through b');
  t.equal(old.json.error.code, 'REPO_NOT_FOUND');
  const moved = await b!.api('GET', '/acme/moved');
  t.equal(moved.status, 200, 'the new name answers through b');
  t.equal(moved.json.id, repoB.id, 'with the same repository');

  // A new repository takes the old name: reads of it through b reach it, not the renamed one.
  const again = await a!.api('POST', '/acme/repos', { body: { name: nameB } });
  t.equal(again.status, 201, 'a new repository under the old name');
  for (let i = 0; i < 2; i++) t.equal((await b!.api('GET', `/acme/${nameB}`)).json.id, again.json.id, `the old name is the new repository through b (read ${i + 1})`);

  // Deleted: gone through b at once, and its name remembered no more.
  t.equal((await a!.api('DELETE', '/acme/moved')).status, 200, 'delete through a');
  t.equal((await b!.api('GET', '/acme/moved')).status, 404, 'a deleted repository is gone through b');
  t.equal((await b!.api('GET', '/acme/moved/bookmarks')).status, 404, 'and stays gone');
});
