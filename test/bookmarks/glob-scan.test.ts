import t from 'tap';
import { answerOrder } from '../helpers/answer-order.js';
import { startTestServer } from '../helpers/server.js';

/**
 * A bookmark glob without a literal prefix tests every name of the repository, each in
 * O(name × glob). Over thousands of long names with a costly glob that is a long walk: other
 * requests are answered while it runs, a page that has tested its share ends where it got to
 * (fewer bookmarks, `has_more`, a cursor), and paging finds every match once.
 */
const s = await startTestServer();
t.teardown(() => s.cleanup());

const ROOT = 'z'.repeat(32);
const BOOKMARKS = 4000;
/** Long names of one repeated letter make each test of `*a*a*…` track a state per `a` seen. */
const nameOf = (i: number): string => `${'a'.repeat(180)}-${String(i).padStart(4, '0')}`;

interface Page {
  bookmarks: Array<{ name: string }>;
  next_cursor: string | null;
  has_more: boolean;
}

const page = async (glob: string, limit: number, cursor: string | null, token?: string): Promise<Page> => {
  const res = await s.api('GET', `/acme/many/bookmarks?limit=${limit}&glob=${encodeURIComponent(glob)}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, token ? { token } : {});
  if (res.status !== 200) throw new Error(`${res.status} ${res.text}`);
  return res.json as Page;
};

/** Every page of `glob`, concatenated, and how many pages it took. */
async function everyPage(glob: string, limit: number): Promise<{ names: string[]; pages: number }> {
  const names: string[] = [];
  let pages = 0;
  for (let cursor: string | null = null; ; ) {
    const got = await page(glob, limit, cursor);
    pages++;
    names.push(...got.bookmarks.map((b) => b.name));
    t.equal(got.has_more, got.next_cursor !== null, 'has_more goes with a cursor');
    if (!got.next_cursor) return { names, pages };
    cursor = got.next_cursor;
  }
}

t.before(async () => {
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'many' } })).status, 201);
  let base = ROOT;
  for (let i = 0; i < BOOKMARKS; i += 100) {
    const bookmarks = Array.from({ length: 100 }, (_, j) => ({ name: nameOf(i + j), create: true }));
    const made = await s.api('POST', '/acme/many/apply-ops', { body: { base_change_id: base, ops: [{ op: 'write', path: 'f.txt', content: `${i}\n` }], bookmarks } });
    if (made.status !== 201) throw new Error(`apply-ops: ${made.status} ${made.text}`);
    base = made.json.change.id as string;
  }
});

// 245 states over names of 185 characters: about 45,000 steps a name at most.
const costly = (tail: string): string => `*${'a*'.repeat(120)}${tail}`;

t.test('a read is answered while a costly glob walks the names', async (t) => {
  const token = await s.token();
  t.equal((await s.api('GET', '/acme/many', { token })).status, 200, 'the token is known to the server');
  const { slow: l, quick: r, quickFirst } = await answerOrder(page(costly('999'), 200, null, token), s.api('GET', '/acme/many', { token }));
  t.equal(r.status, 200);
  t.ok(quickFirst, 'the read did not wait for the walk');
  t.ok(l.has_more, 'the page ended before the names did');
});

t.test('pages of a costly glob end where they got to, and together find every match once', async (t) => {
  const rare = await everyPage(costly('999'), 200);
  t.same(rare.names, [999, 1999, 2999, 3999].map(nameOf), 'the four names ending in 999, in order');
  t.ok(rare.pages > 1, `${rare.pages} pages, most of them short`);
  const tenth = await everyPage(costly('7'), 150);
  t.same(tenth.names, Array.from({ length: BOOKMARKS }, (_, i) => nameOf(i)).filter((n) => n.endsWith('7')), 'a tenth of the names, each once');
});

t.test('a cheap glob fills its page', async (t) => {
  const got = await page(`${'a'.repeat(180)}-00*`, 200, null);
  t.same(got.bookmarks.map((b) => b.name), Array.from({ length: 100 }, (_, i) => nameOf(i)));
  t.equal(got.has_more, false);
});
