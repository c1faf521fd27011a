import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { encodeLogRecord } from '../../src/cluster/replica/log-record.js';
import { loadConfig } from '../../src/config.js';
import { repoShard } from '../../src/storage/shards.js';
import { CLI_NODE_SETTINGS } from '../helpers/cluster-settings.js';
import { startGitServer } from '../helpers/git-server.js';
import { ROOT, createRepos, retrying } from '../helpers/replica-scenarios.js';
import { startSlowLogNode } from '../helpers/slow-log-node.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * A write its shard log has not acknowledged stays inside the node that made it (docs/design.md,
 * "Reads" under "Cluster mode"): a read through the owner does not show it, a webhook receiver
 * and an upstream do not hear of it, until the log acknowledges it, and never when the log
 * refuses it (else a client or a receiver could act on a write that is then lost). One node whose
 * JetStream connection goes through a delay proxy: a write commits locally at once, and its
 * append takes as long as the proxy holds it.
 */
const started = Date.now();
const { cluster, node, proxy } = await startSlowLogNode(t);
const [repo] = await createRepos(node, 1);
t.comment(`cluster up in ${Date.now() - started} ms`);
const move = (name: string, changeId = ROOT) =>
  node.api('POST', `/acme/${repo!.name}/bookmarks`, { body: { name, change_id: changeId } }).then((res) => ({ status: res.status, text: res.text, json: res.json, at: Date.now() }));

t.test('a webhook delivery leaves only once the log holds its event', async (t) => {
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const made = await node.api('POST', '/acme/webhook-targets', { body: { url: receiver.url('/hook'), events: ['bookmark.created'], repo_ids: [repo!.id] } });
  t.equal(made.status, 201, `the target is made (${made.text})`);
  receiver.setSecret('/hook', made.json.secret as string);
  const arrival = (name: string): number | undefined => receiver.unique('/hook').find((d) => d.body.data.bookmark.name === name)?.at;

  proxy.setDelay(800);
  t.teardown(() => proxy.setDelay(0));
  const written = await move('announced');
  t.equal(written.status, 201, `the bookmark is written (${written.text})`);
  await receiver.waitFor(() => arrival('announced') !== undefined, 30_000, 'the delivery');
  const at = arrival('announced')!;
  t.ok(at >= written.at - 150, `the receiver heard of the write only with its acknowledgement (${at - written.at} ms from the 201)`);
});

t.test('a push upstream sends only what the log holds', async (t) => {
  proxy.setDelay(0);
  const git = await startGitServer({});
  t.teardown(() => git.close());
  const url = await git.createRepo('mirror');
  t.equal((await node.api('PATCH', `/acme/${repo!.name}`, { body: { upstream: { url } } })).status, 200);
  const change = await node.api('POST', `/acme/${repo!.name}/apply-ops`, {
    body: { base_change_id: ROOT, message: 'first', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] },
  });
  t.equal(change.status, 201, `the change is written (${change.text.slice(0, 200)})`);

  // The push asks the upstream for its refs and is held there while a bookmark is written: it
  // then reads the bookmark, committed here, before the log acknowledged it.
  const hold = git.hold((req) => req.method === 'GET' && req.service === 'git-receive-pack');
  const push = await node.api('POST', `/acme/${repo!.name}/push`);
  t.equal(push.status, 201, `the push is queued (${push.text})`);
  await hold.held;
  proxy.setDelay(800);
  t.teardown(() => proxy.setDelay(0));
  const slow = move('early', change.json.change.id as string);
  await sleep(1000);
  hold.release();
  const ref = join(git.root, 'mirror.git', 'refs', 'heads', 'early');
  const started = Date.now();
  while (!existsSync(ref) && Date.now() - started < 30_000) await sleep(20);
  const pushedAt = Date.now();
  const written = await slow;
  t.equal(written.status, 201, `the bookmark is written (${written.text})`);
  const sync = await node.api('GET', `/acme/${repo!.name}/upstream/syncs/${push.json.id}`);
  t.ok(existsSync(ref), `the bookmark reached the upstream (sync: ${sync.text})`);
  t.ok(existsSync(ref) && pushedAt >= written.at - 150, `the upstream got the bookmark only with its acknowledgement (${pushedAt - written.at} ms from the 201)`);
});

t.test('a read through the owner waits for the log, and never shows a write the log lost', async (t) => {
  const started = Date.now();
  const bookmark = (name: string) => node.api('GET', `/acme/${repo!.name}/bookmarks/${name}`);

  // A slow log: each append takes about 3.2 s (a publish and a read, 0.8 s each way).
  proxy.setDelay(800);
  const slow = move('slow');
  let seen: { sent: number; at: number } | null = null;
  while (!seen) {
    const sent = Date.now();
    const res = await bookmark('slow');
    if (res.status === 200) seen = { sent, at: Date.now() };
    else t.equal(res.status, 404, `before it commits the bookmark is missing (${res.text.slice(0, 200)})`);
    await sleep(100);
  }
  const written = await slow;
  t.equal(written.status, 201, 'the write is acknowledged once the slow log took it');
  t.ok(seen.sent < written.at - 1000, `a read was sent while the write waited for the log (${written.at - seen.sent} ms before its 201)`);
  // The read is released when the log acknowledges; the write's 201 a hand-off to its worker later.
  t.ok(seen.at >= written.at - 150, `the read shows the bookmark only with the acknowledgement (${seen.at - written.at} ms from the 201)`);
  t.comment(`slow log done at ${Date.now() - started} ms`);

  // A refused append: while the owner's next append is on its way through the slow proxy,
  // another writer appends to the shard's log first (as a newer owner would), so the log refuses
  // it; the write fails with 503 and the shard's copy here is dropped and rebuilt from the log.
  const intruder = await openShardLog(loadConfig({ ...cluster.env, ...CLI_NODE_SETTINGS, REPOHOST_CLUSTER_NATS: cluster.nats!.endpoints.join(',') }).cluster!);
  t.teardown(() => intruder.close());
  const shard = repoShard(repo!.id);
  let settled = false;
  const lost = move('lost').then((res) => {
    settled = true;
    return res;
  });
  const last = await intruder.last(shard);
  await intruder.append(shard, last, `intruder:${Date.now()}`, encodeLogRecord({ epoch: 0, writeSets: [] }));
  const answers: number[] = [];
  while (!settled) {
    const res = await bookmark('lost');
    answers.push(res.status);
    t.not(res.status, 200, `a read while the write is unconfirmed does not show it (${res.status} ${res.text.slice(0, 200)})`);
    await sleep(100);
  }
  t.equal((await lost).status, 503, 'the write is answered 503: the log refused it');
  t.ok(answers.length > 0, `reads were made while it waited (${answers.join(' ')})`);
  t.comment(`lost write answered at ${Date.now() - started} ms`);
  proxy.setDelay(0);
  const after = await retrying(() => bookmark('lost'));
  t.equal(after.status, 404, `once the shard is served again, the lost write is not there (${after.text.slice(0, 200)})`);
  t.equal((await retrying(() => bookmark('slow'))).status, 200, 'the acknowledged one is');
});
