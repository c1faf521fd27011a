import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BroadcastChannel } from 'node:worker_threads';
import t, { type Test } from 'tap';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import type { PlacementView } from '../../src/cluster/placement.js';
import { NodeReplicas } from '../../src/cluster/replica/node-replicas.js';
import { APPEND_CHANNEL, SERVING_CHANNEL, ackChannel, type AppendReply, type AppendRequest, type ServingMessage } from '../../src/cluster/replica/replica-channels.js';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/database.js';
import { readReplicaPosition } from '../../src/storage/replica-position.js';
import { encodeWriteSet } from '../../src/storage/write-set-codec.js';
import { startEtcd } from '../helpers/cluster-engines.js';

// A node's replicas closed while a shard's activation or an append is still under way, on a real
// etcd log. The server closes the replicas after its worker threads, so nobody listens by then:
// once the close begins nothing is posted to the threads. An activation goes on after the
// channels are closed, and a message on a closed BroadcastChannel throws, uncaught, and ends the
// node (seen under load before the guard).
const etcd = await startEtcd({ members: 1 });
t.teardown(() => etcd.stop());
const work = mkdtempSync(join(tmpdir(), 'repohost-node-replicas-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

const SHARD = 7;

const view: PlacementView = {
  localNodeId: 'a',
  shard: (shard) => (shard === SHARD ? { owner: 'a', epoch: 1, followers: [] } : undefined),
  node: () => undefined,
  nodes: () => [],
  onChange: () => () => undefined,
};

async function openReplicas(name: string): Promise<{ replicas: NodeReplicas; commits: () => number; close: () => Promise<void> }> {
  const config = loadConfig({
    REPOHOST_CLUSTER_NAME: name,
    REPOHOST_CLUSTER_ETCD: etcd.endpoints.join(','),
    REPOHOST_NODE_ID: 'a',
    REPOHOST_NODE_INTERNAL_URL: 'http://127.0.0.1:1',
    REPOHOST_SHARD_LOG: 'etcd',
  });
  const storage = openStorage(join(work, name));
  const replicas = new NodeReplicas({
    storage,
    log: await openShardLog(config.cluster!),
    view,
    unknownDeadlineMs: 5000,
    seed: () => Promise.reject(new Error('no peer to copy from')),
    trimEvery: 0,
    onActiveChange: () => undefined,
    appended: () => undefined,
    refused: () => undefined,
  });
  return { replicas, commits: () => readReplicaPosition(storage, SHARD).commits, close: () => storage.close() };
}

/** Every `serving` message broadcast: whether it says the shard is served. */
/** Every error nothing caught while the test runs. */
function watchUncaught(t: Test): unknown[] {
  const uncaught: unknown[] = [];
  const keep = (err: unknown): void => void uncaught.push(err);
  process.on('uncaughtException', keep);
  process.on('unhandledRejection', keep);
  t.teardown(() => {
    process.off('uncaughtException', keep);
    process.off('unhandledRejection', keep);
  });
  return uncaught;
}

async function activated(replicas: NodeReplicas): Promise<boolean> {
  const deadline = Date.now() + 20_000;
  while (!replicas.active(SHARD) && Date.now() < deadline) await sleep(20);
  return replicas.active(SHARD);
}

function listenServing(t: Test): Array<{ active: boolean }> {
  const seen: Array<{ active: boolean }> = [];
  const channel = new BroadcastChannel(SERVING_CHANNEL);
  channel.onmessage = (event) => {
    const message = (event as { data: ServingMessage }).data;
    if (message.type === 'serving') seen.push({ active: message.flags[SHARD] === 1 });
  };
  t.teardown(() => channel.close());
  return seen;
}

t.test('the shard activates through the log and the node broadcasts it', async (t) => {
  const { replicas, close } = await openReplicas('activates');
  const seen = listenServing(t);
  replicas.start();
  t.ok(await activated(replicas), 'active once fenced in the log');
  await sleep(100);
  t.ok(seen.some((m) => m.active), 'and the threads were told');
  await replicas.close();
  await close();
});

t.test('closed in the middle of an activation: nothing is posted on the closed channels', async (t) => {
  const { replicas, close } = await openReplicas('closed-early');
  const seen = listenServing(t);
  const uncaught = watchUncaught(t);
  replicas.start();
  t.equal(replicas.reports()[SHARD]!.state, 'catching-up', 'the activation reads the log when close begins');
  await replicas.close();
  // The activation's read of the log settles (or fails) after the close; give its change of
  // state every chance to be broadcast.
  await sleep(1000);
  t.same(uncaught, [], 'no error escaped');
  t.notOk(
    seen.some((m) => m.active),
    'no serving set says the shard is served',
  );
  await close();
});

t.test('closed while a write set is on its way to the log: no answer once the close begins', async (t) => {
  const { replicas, commits, close } = await openReplicas('closed-appending');
  const uncaught = watchUncaught(t);
  replicas.start();
  t.ok(await activated(replicas), 'active');
  const THREAD = 3;
  const appends = new BroadcastChannel(APPEND_CHANNEL);
  const acks = new BroadcastChannel(ackChannel(THREAD));
  t.teardown(() => {
    appends.close();
    acks.close();
  });
  const answered: number[] = [];
  acks.onmessage = (event) => void answered.push((event as { data: AppendReply }).data.id);
  // What a worker thread posts for one committed transaction of the shard.
  const request = (id: number, commit: number): AppendRequest => ({
    thread: THREAD,
    id,
    barrier: [],
    sets: [{ shard: SHARD, commit, bytes: encodeWriteSet({ shard: SHARD, epoch: 1, batchId: `b${id}`, ops: [] }) }],
  });
  const first = commits() + 1;
  appends.postMessage(request(1, first));
  const deadline = Date.now() + 10_000;
  while (!answered.includes(1) && Date.now() < deadline) await sleep(10);
  t.same(answered, [1], 'the first set is in the log and answered (the answer channel is open now)');

  // The second arrives, goes to the log, and the replicas close before the log answers.
  const arrived = new Promise<void>((resolve) => {
    const watch = new BroadcastChannel(APPEND_CHANNEL);
    watch.onmessage = () => {
      watch.close();
      setImmediate(resolve);
    };
  });
  appends.postMessage(request(2, first + 1));
  await arrived;
  await replicas.close();
  await sleep(1000);
  t.same(uncaught, [], 'no error escaped');
  t.same(answered, [1], 'the second set is not answered');
  await close();
});
