import t from 'tap';
import { allOwnedBy, startCluster, type TestNode } from '../helpers/cluster.js';
import { ROOT } from '../helpers/replica-scenarios.js';

// A write's events wait in its shard's outbox for the webhook fan-out. When no target hears them,
// taking them out at once was a second write on the shard, and so a second append to its log for
// every API write; they are now left there a while and taken together
// (src/actors/system/webhooks/outbox-fan-out.ts, `DeferredEvents`).

/** Records the node has appended to shard logs so far. */
async function appends(node: TestNode): Promise<number> {
  const line = (await node.metrics()).split('\n').find((l) => l.startsWith('repohost_shard_log_append_seconds_count'));
  return line ? Number(line.split(' ').pop()) : 0;
}

t.test('a write in an org that no target hears costs one log append', async (t) => {
  const cluster = await startCluster(t, { log: 'etcd', count: 1, fixedPlacement: { a: allOwnedBy('a') } });
  await cluster.settled();
  const [a] = cluster.nodes;
  t.equal((await a!.api('POST', '/acme/repos', { body: { name: 'quiet' } })).status, 201);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const before = await appends(a!);
  const writes = 20;
  for (let i = 0; i < writes; i++) {
    t.equal((await a!.api('POST', '/acme/quiet/bookmarks', { body: { name: `b${i}`, change_id: ROOT } })).status, 201, `write ${i}`);
    // Apart, so that the fan-out would drain each write's events on its own.
    await new Promise((resolve) => setTimeout(resolve, 60));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  const made = (await appends(a!)) - before;
  t.ok(made >= writes, `every write was appended (${made})`);
  t.ok(made <= writes + 2, `${made} appends for ${writes} writes`);
});
