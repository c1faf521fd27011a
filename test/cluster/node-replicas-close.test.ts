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

/** Whether `ok()` held within `ms`, polled. */
async function within(ms: number, ok: () => boolean): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!ok() && Date.now() < deadline) await sleep(10);
  return ok();
}

const activated = (replicas: NodeReplicas): Promise<boolean> => within(20_000, () => replicas.active(SHARD));

/** Every `serving` message broadcast: whether it says the shard is served. */
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
  t.ok(await within(5000, () => seen.some((m) => m.active)), 'and the threads were told');
  await replicas.close();
  await close();
});

t.test('closed in the middle of an activation: nothing is posted on the closed channels', async (t) => {
  const { replicas, close } = await openReplicas('closed-early');
  const seen = listenServing(t);
  const uncaught = watchUncaught(t);
  // start() broadcasts the serving set once; the activation's change to catching-up is queued
  // to be broadcast, and the close begins before it goes out.
  replicas.start();
  t.equal(replicas.reports()[SHARD]!.state, 'catching-up', 'the activation reads the log when close begins');
  await replicas.close();
  // The activation's read of the log settles (or fails) after the close; give its change of
  // state every chance to be broadcast.
  await sleep(1000);
  t.same(uncaught, [], 'no error escaped');
  t.equal(seen.length, 1, 'only the serving set of the start went out');
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

  // etcd stopped: the second set arrives and waits in the log's client, the close begins, and
  // only then does etcd answer.
  etcd.pause(0);
  let paused = true;
  t.teardown(() => void (paused && etcd.resume(0)));
  const watch = new BroadcastChannel(APPEND_CHANNEL);
  t.teardown(() => watch.close());
  let arrived = false;
  watch.onmessage = () => void setImmediate(() => (arrived = true));
  appends.postMessage(request(2, first + 1));
  t.ok(await within(10_000, () => arrived), 'the second set arrived');
  await sleep(100);
  const closing = replicas.close();
  await sleep(200);
  etcd.resume(0);
  paused = false;
  await closing;
  await sleep(1000);
  t.same(uncaught, [], 'no error escaped');
  t.same(answered, [1], 'the second set is not answered');
  await close();
});
