import t from 'tap';
import { LruCache } from '../../src/storage/read/lru-cache.js';

t.test('the read cache keeps what is used and forgets what is not, within its bounds', async (t) => {
  t.test('entry bound: never more than maxEntries; a value used every round survives', async (t) => {
    const cache = new LruCache<number>(100, Infinity, () => 0);
    cache.set('hot', 1);
    for (let i = 0; i < 1000; i++) {
      cache.set(`k${i}`, i);
      t.equal(cache.get('hot'), 1);
    }
    let kept = 0;
    for (let i = 0; i < 1000; i++) if (cache.get(`k${i}`) !== undefined) kept++;
    t.ok(kept <= 100, `${kept} entries kept`);
    t.ok(kept >= 50, 'the most recent half-generation at least');
    t.equal(cache.get('k999'), 999, 'the newest entry is there');
    t.equal(cache.get('k0'), undefined, 'the oldest is gone');
  });

  t.test('weight bound: large values push out old ones; a value over half the budget is not kept', async (t) => {
    const cache = new LruCache<Buffer>(1000, 1000, (b) => b.length);
    cache.set('too-big', Buffer.alloc(600));
    t.equal(cache.get('too-big'), undefined);
    for (let i = 0; i < 20; i++) cache.set(`b${i}`, Buffer.alloc(100));
    let weight = 0;
    for (let i = 0; i < 20; i++) weight += cache.get(`b${i}`)?.length ?? 0;
    t.ok(weight <= 1000, `${weight} bytes kept`);
    t.ok(cache.get('b19'), 'the newest is kept');
  });

  t.test('replacing a value keeps the newest one', async (t) => {
    const cache = new LruCache<string>(10, Infinity, () => 0);
    cache.set('a', 'one');
    for (let i = 0; i < 6; i++) cache.set(`x${i}`, 'x');
    cache.set('a', 'two');
    t.equal(cache.get('a'), 'two');
  });

  t.test('scopes: the same key in two scopes is two entries; the bounds count every scope', async (t) => {
    const cache = new LruCache<string>(100, Infinity, () => 0);
    cache.set('oid', 'in a', 'repo-a');
    cache.set('oid', 'in b', 'repo-b');
    t.equal(cache.get('oid', 'repo-a'), 'in a');
    t.equal(cache.get('oid', 'repo-b'), 'in b');
    t.equal(cache.get('oid'), undefined, 'nor is it in the default scope');
    cache.delete('oid', 'repo-a');
    t.equal(cache.get('oid', 'repo-a'), undefined);
    t.equal(cache.get('oid', 'repo-b'), 'in b', 'deleting in one scope leaves the other');
    for (let i = 0; i < 1000; i++) cache.set(`k${i}`, 'v', `repo-${i % 7}`);
    let kept = 0;
    for (let i = 0; i < 1000; i++) if (cache.get(`k${i}`, `repo-${i % 7}`) !== undefined) kept++;
    t.ok(kept <= 100, `${kept} entries kept over 7 scopes`);
  });
});
