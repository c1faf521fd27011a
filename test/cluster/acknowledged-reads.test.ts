import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { encodeLogRecord } from '../../src/cluster/replica/log-record.js';
import { loadConfig } from '../../src/config.js';
import { repoShard } from '../../src/storage/shards.js';
import { CLI_NODE_SETTINGS } from '../helpers/cluster-settings.js';
import { startDelayProxy, type DelayProxy } from '../helpers/delay-proxy.js';
import { startCluster } from '../helpers/cluster.js';
import { ROOT, createRepos, retrying } from '../helpers/replica-scenarios.js';

/**
 * A read through a shard's owner never shows a write its shard log has not acknowledged
 * (docs/design.md, "Reads" under "Cluster mode"). One node, whose JetStream connection goes
 * through a delay proxy: a write commits locally at once, and its append takes as long as the
 * proxy holds it. The bookmark the write makes is read through the same node meanwhile: it shows
 * only once the log acknowledged the write, and never when the log refused it.
 */
t.test('a read through the owner waits for the log, and never shows a write the log lost', async (t) => {
  let proxy!: DelayProxy;
  const started = Date.now();
  const cluster = await startCluster(t, {
    log: 'jetstream',
    count: 1,
    natsVia: async (nats) => {
      const member = new URL(nats.endpoints[0]!);
      proxy = await startDelayProxy({ targetHost: member.hostname, targetPort: Number(member.port) });
      t.teardown(() => proxy.stop());
      return [`nats://${proxy.address}`];
    },
  });
  const [node] = cluster.nodes;
  await cluster.settled();
  const [repo] = await createRepos(node!, 1);
  t.comment(`cluster up in ${Date.now() - started} ms`);
  const bookmark = (name: string) => node!.api('GET', `/acme/${repo!.name}/bookmarks/${name}`);
  const move = (name: string) => node!.api('POST', `/acme/${repo!.name}/bookmarks`, { body: { name, change_id: ROOT } });

  // A slow log: each append takes about 3.2 s (a publish and a read, 0.8 s each way).
  proxy.setDelay(800);
  const slow = move('slow').then((res) => ({ status: res.status, at: Date.now() }));
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
