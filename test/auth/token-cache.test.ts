import t from 'tap';
import { TokenCache } from '../../src/http/auth/token-cache.js';

t.test('token cache - holds entries within its byte budget, dropping the oldest first', async (t) => {
  const cache = new TokenCache<{ bytes: number; n: number }>(100_000);
  const token = (i: number): string => `${i}.`.padEnd(4000, 'x');
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
