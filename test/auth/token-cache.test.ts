import t from 'tap';
import { TokenCache } from '../../src/http/auth/token-cache.js';

t.test('token cache - holds entries within its byte budget, dropping the oldest first', async (t) => {
  const cache = new TokenCache<{ bytes: number; n: number }>(100_000);
  const token = (i: number): string => `${'x'.repeat(3990)}.${i}`;
  let most = 0;
  for (let i = 0; i < 1000; i++) {
    cache.set(token(i), { bytes: 600, n: i });
    most = Math.max(most, cache.bytes);
  }
  t.ok(most <= 100_000, `at most ${most} bytes held at any time`);
  t.ok(cache.size > 10 && cache.size < 30, `${cache.size} entries of ~4.8 kB fit`);
  t.equal(cache.get(token(999))?.n, 999, 'the newest is kept');
  t.equal(cache.get(token(0)), undefined, 'the oldest went first');
});

t.test('token cache - replacing and deleting keep the accounting exact', async (t) => {
  const cache = new TokenCache<{ bytes: number }>(10_000);
  cache.set('a', { bytes: 100 });
  const one = cache.bytes;
  cache.set('a', { bytes: 100 });
  t.equal(cache.bytes, one, 'a replaced entry is counted once');
  cache.delete('a');
  cache.delete('a');
  t.equal(cache.bytes, 0);
  t.equal(cache.size, 0);
  cache.set('huge', { bytes: 20_000 });
  t.equal(cache.size, 0, 'an entry larger than the whole budget is not kept');
});

t.test('token cache - a token is found only by all of it, not by its last characters alone', async (t) => {
  const cache = new TokenCache<{ bytes: number; who: string }>(10_000);
  cache.set('header.payload.signature', { bytes: 10, who: 'signed' });
  t.equal(cache.get('header.other-payload.signature'), undefined, 'another payload with the same signature is a miss');
  cache.delete('header.other-payload.signature');
  t.equal(cache.get('header.payload.signature')?.who, 'signed', 'and deleting it leaves the verified token cached');
});

t.test('token cache - two tokens of one slot: the later evicts the earlier, and the bytes stay exact', async (t) => {
  const cache = new TokenCache<{ bytes: number; who: string }>(10_000);
  const tail = '.0123456789abcdef';
  cache.set(`first${tail}`, { bytes: 10, who: 'first' });
  const one = cache.bytes;
  cache.set(`other${tail}`, { bytes: 10, who: 'other' });
  t.equal(cache.get(`first${tail}`), undefined, 'the earlier token is gone (verified again at worst)');
  t.equal(cache.get(`other${tail}`)?.who, 'other');
  t.equal(cache.size, 1);
  t.equal(cache.bytes, one, 'counted once');
  cache.delete(`first${tail}`);
  t.equal(cache.get(`other${tail}`)?.who, 'other', 'deleting the evicted token leaves the slot alone');
});

t.test('token cache - entries replaced or deleted early are skipped by the eviction order', async (t) => {
  const cache = new TokenCache<{ bytes: number; n: number }>(entryBudget(3));
  cache.set('t.a', { bytes: 0, n: 1 });
  cache.set('t.b', { bytes: 0, n: 2 });
  cache.set('t.a', { bytes: 0, n: 3 });
  cache.set('t.c', { bytes: 0, n: 4 });
  t.same(['t.a', 't.b', 't.c'].map((k) => cache.get(k)?.n), [3, 2, 4], 'three fit; a replaced one is now the newest');
  cache.set('t.d', { bytes: 0, n: 5 });
  t.same(['t.a', 't.b', 't.c', 't.d'].map((k) => cache.get(k)?.n), [3, undefined, 4, 5], 'the oldest (b) went, not the replaced a');
  cache.delete('t.c');
  cache.set('t.e', { bytes: 0, n: 6 });
  cache.set('t.f', { bytes: 0, n: 7 });
  t.same(['t.a', 't.d', 't.e', 't.f'].map((k) => cache.get(k)?.n), [undefined, 5, 6, 7], 'then a: the deleted c was passed over');
  // Half a million distinct tokens through a cache of three: the bookkeeping stays as small.
  for (let i = 0; i < 500_000; i++) cache.set(`t.${i}`, { bytes: 0, n: i });
  t.ok(cache.size >= 2 && cache.size <= 3, `${cache.size} entries held`);
  t.equal(cache.get('t.499999')?.n, 499_999);
  t.ok(cache.bytes <= entryBudget(3));
});

/** The budget that holds `n` entries of tokens of three characters and no value bytes. */
function entryBudget(n: number): number {
  return n * (160 + 3);
}
