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

t.test('token cache - a token is found only by all of it, not by its signature segment alone', async (t) => {
  const cache = new TokenCache<{ bytes: number; who: string }>(10_000);
  cache.set('header.payload.signature', { bytes: 10, who: 'signed' });
  t.equal(cache.get('header.other-payload.signature'), undefined, 'another payload with the same signature is a miss');
  cache.delete('header.other-payload.signature');
  t.equal(cache.get('header.payload.signature')?.who, 'signed', 'and deleting it leaves the verified token cached');
});
