import t from 'tap';
import { Etcd3 } from 'etcd3';
import { PrefixCache } from '../../src/cluster/control/prefix-cache.js';
import { startEtcd } from '../helpers/cluster-engines.js';

// The cache every control-plane watch goes through, on a real one-member etcd.
const etcd = await startEtcd({ members: 1 });
t.teardown(() => etcd.stop());

t.test('a put and a delete reach the cache through its watch', async (t) => {
  const client = new Etcd3({ hosts: etcd.endpoints });
  t.teardown(() => client.close());
  await client.put('seen/a').value('1');
  const cache = new PrefixCache(client, 'seen/', (raw) => Number(raw));
  t.teardown(() => cache.close());
  await cache.start();
  const changes: string[][] = [];
  cache.onChange((names) => changes.push(names));
  t.equal(cache.get('a')?.value, 1, 'read at start');
  await client.put('seen/b').value('2');
  await client.delete().key('seen/a');
  for (let i = 0; i < 100 && changes.flat().length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.same(changes.flat(), ['b', 'a'], 'each change reported once, in order');
  t.same([...cache.entriesNow()].map(([name, v]) => [name, v.value]), [['b', 2]]);
});

t.test('closed while its watch is being created on a closed client: start settles', async (t) => {
  // A node shutting down closes its client while a re-read is between its read and its watch.
  // The client's watch then retries forever and never reports created or failed.
  const client = new Etcd3({ hosts: etcd.endpoints });
  const closesAfterRead = new Proxy(client, {
    get(target, prop, receiver) {
      if (prop !== 'getAll') return Reflect.get(target, prop, receiver) as unknown;
      return () => ({
        prefix: (prefix: string) => ({
          exec: async () => {
            const res = await target.getAll().prefix(prefix).exec();
            target.close();
            return res;
          },
        }),
      });
    },
  });
  const cache = new PrefixCache(closesAfterRead, 'closing/', (raw) => raw);
  const started = cache.start().then(() => 'settled');
  const waited = await Promise.race([started, new Promise((r) => setTimeout(() => r('pending'), 300))]);
  t.equal(waited, 'pending', 'waits for the watch while the cache is open');
  cache.close();
  const after = await Promise.race([started, new Promise((r) => setTimeout(() => r('pending'), 2000))]);
  t.equal(after, 'settled', 'start returns once the cache closes');
});
