import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startEtcd, startNats } from '../helpers/cluster-engines.js';

// The harness the cluster tests stand on: real 3-member engines that elect a new leader when
// the old one is killed.
t.test('etcd elects a new leader after the leader is killed', async (t) => {
  const etcd = await startEtcd();
  t.teardown(() => etcd.stop());
  const first = await etcd.leader();
  t.ok(first >= 0, 'a leader is elected');
  await etcd.kill(first);
  let next = -1;
  for (let i = 0; i < 50 && next < 0; i++) {
    await sleep(100);
    next = await etcd.leader();
  }
  t.ok(next >= 0 && next !== first, `member ${next} leads after ${first} died`);
});

t.test('nats-server forms a JetStream cluster with a meta leader', async (t) => {
  const nats = await startNats();
  t.teardown(() => nats.stop());
  t.ok((await nats.leader()) >= 0);
  t.equal(nats.endpoints.length, 3);
});
