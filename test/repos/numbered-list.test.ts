import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { checkRepositories } from '../helpers/consistency.js';
import { answerOrder } from '../helpers/answer-order.js';
import { startTestServer } from '../helpers/server.js';

/**
 * `GET /{org}/repos/list` finds a page by its position in the org's list ordered by name or by
 * creation time, orders the org keeps beside the list: every order and page agrees with the
 * records, a rename or delete moves the repository in them, a restricted token sees its own
 * repositories alike, a data directory of the layout before the orders gets them when opened,
 * and a filtered list that reads many records lets other requests run meanwhile.
 */
const s = await startTestServer();
t.teardown(() => s.cleanup());

interface Item {
  id: string;
  name: string;
  created_at: string;
}

const list = async (query: string, token?: string): Promise<{ repos: Item[]; total: number; total_pages: number }> => {
  const res = await s.api('GET', `/acme/repos/list?${query}`, token ? { token } : {});
  if (res.status !== 200) throw new Error(`${query}: ${res.status} ${res.text}`);
  return res.json as { repos: Item[]; total: number; total_pages: number };
};

/** Every page of `query` at `size`, concatenated, with the total each page gave. */
async function allPages(query: string, size: number, token?: string): Promise<{ names: string[]; totals: Set<number> }> {
  const names: string[] = [];
  const totals = new Set<number>();
  for (let page = 1; ; page++) {
    const got = await list(`${query}&pageSize=${size}&page=${page}`, token);
    totals.add(got.total);
    if (got.repos.length === 0) return { names, totals };
    names.push(...got.repos.map((r) => r.name));
  }
}

const byName = (a: string, b: string): number => (a.toLowerCase() < b.toLowerCase() ? -1 : a.toLowerCase() > b.toLowerCase() ? 1 : 0);
const NAMES = ['b-2', 'B_1', 'a.3', 'A0', 'c', 'zeta', 'Mid', 'm_id', '9lives', 'x-ray'];

t.test('pages in every order agree with the records, whole and without overlap', async (t) => {
  for (const [i, name] of NAMES.entries()) {
    t.equal((await s.api('POST', '/acme/repos', { body: { name, tags: { n: String(i % 3) } } })).status, 201);
  }
  const whole = await list('pageSize=100&sortBy=created_at&sortOrder=asc');
  t.same(whole.repos.map((r) => r.name), NAMES, 'creation order');
  const created = whole.repos.map((r) => `${r.created_at} ${r.id}`);
  t.same(created, [...created].sort(), 'by created_at, ties by id');
  for (const size of [1, 3, 4]) {
    const asc = await allPages('sortBy=name&sortOrder=asc', size);
    t.same(asc.names, [...NAMES].sort(byName), `by name ascending, ${size} a page`);
    t.same([...asc.totals], [NAMES.length]);
    t.same((await allPages('sortBy=name&sortOrder=desc', size)).names, [...NAMES].sort(byName).reverse(), `descending, ${size} a page`);
    t.same((await allPages('sortBy=created_at&sortOrder=desc', size)).names, [...NAMES].reverse(), `newest first, ${size} a page`);
  }
  const last = await list('pageSize=3&page=4&sortBy=name&sortOrder=asc');
  t.same({ names: last.repos.map((r) => r.name), total_pages: last.total_pages }, { names: [[...NAMES].sort(byName).at(-1)], total_pages: 4 }, 'the last page holds the rest');
  t.same((await list('pageSize=3&page=5')).repos, [], 'a page past the end is empty');
});

t.test('a rename moves the repository in the order by name; a delete takes it out of both', async (t) => {
  t.equal((await s.api('PATCH', '/acme/zeta', { body: { name: 'Alpha' } })).status, 200);
  t.equal((await s.api('PATCH', '/acme/c', { body: { name: 'C' } })).status, 200, 'a change of casing only');
  t.equal((await s.api('DELETE', '/acme/Mid')).status, 200);
  const names = NAMES.filter((n) => n !== 'Mid').map((n) => (n === 'zeta' ? 'Alpha' : n === 'c' ? 'C' : n));
  t.same((await allPages('sortBy=name&sortOrder=asc', 4)).names, [...names].sort(byName));
  t.same((await allPages('sortBy=created_at&sortOrder=asc', 4)).names, names, 'the creation order keeps a renamed repository in its place');
  t.equal((await list('pageSize=1')).total, names.length);
  await s.stop();
  await checkRepositories(t, s.dataDir, 'acme');
  await s.restart();
});

t.test('a restricted token pages through only its repositories, in the same orders', async (t) => {
  const whole = await list('pageSize=100&sortBy=created_at&sortOrder=asc');
  const mine = whole.repos.filter((r) => ['b-2', 'a.3', 'x-ray', 'Alpha'].includes(r.name));
  // The first id twice: a repository claimed twice is still one.
  const token = await s.token({ repo_ids: [...mine.map((r) => r.id), mine[0]!.id] });
  const names = mine.map((r) => r.name);
  const asc = await allPages('sortBy=name&sortOrder=asc', 3, token);
  t.same(asc.names, [...names].sort(byName));
  t.same([...asc.totals], [4], 'its total counts only them');
  t.same((await allPages('sortBy=created_at&sortOrder=desc', 1, token)).names, [...names].reverse());
  const cursorPage = await s.api('GET', '/acme/repos?limit=2', { token });
  t.same(cursorPage.json.repos.map((r: Item) => r.name), [...names].reverse().slice(0, 2), 'the cursor list too, newest first');
  const rest = await s.api('GET', `/acme/repos?limit=5&cursor=${encodeURIComponent(cursorPage.json.next_cursor as string)}`, { token });
  t.same(rest.json.repos.map((r: Item) => r.name), [...names].reverse().slice(2));
  t.equal(rest.json.has_more, false);
  // Tagged n=0: b-2 and x-ray of its four (A0 too, not its own).
  const filtered = await list(`pageSize=1&page=2&sortBy=name&sortOrder=asc&metadata=${encodeURIComponent('{"n":"0"}')}`, token);
  t.same({ names: filtered.repos.map((r) => r.name), total: filtered.total }, { names: ['x-ray'], total: 2 }, 'a filter counts its matches among them');
});

t.test('a filter counts every match and pages through them', async (t) => {
  const filter = encodeURIComponent('{"n":"0"}');
  const all = await list(`pageSize=100&sortBy=name&sortOrder=asc&metadata=${filter}`);
  t.ok(all.total >= 3);
  const paged = await allPages(`sortBy=name&sortOrder=asc&metadata=${filter}`, 2);
  t.same(paged.names, all.repos.map((r) => r.name));
  t.same([...paged.totals], [all.total]);
});

t.test('a data directory of layout 5 gets the orders when it is opened', async (t) => {
  const before = await Promise.all(['sortBy=name&sortOrder=asc', 'sortBy=created_at&sortOrder=desc'].map((q) => list(`pageSize=100&${q}`)));
  const orgId = (await s.api('GET', '/acme')).json.id as string;
  await s.stop();
  // What layout 5 kept: each entry of the list `true`, no orders.
  const storage = openStorage(s.dataDir);
  await storage.root.transaction(() => {
    for (const key of storage.meta.getKeys(Ranges.orgRepos(orgId))) storage.meta.putSync(key, true);
    for (const range of [Ranges.orgReposByName(orgId), Ranges.orgReposByCreated(orgId)]) {
      for (const key of storage.meta.getKeys(range)) storage.meta.removeSync(key);
    }
    storage.meta.putSync(K.layoutVersion(), 5);
  });
  await storage.close();
  // Killed after its first transaction of five entries (it pauses there), then resumed by the server.
  const child = spawn(process.execPath, [fileURLToPath(new URL('../storage/fixtures/slow-migration.js', import.meta.url)), s.dataDir, '2000'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for await (const line of createInterface({ input: child.stdout })) {
    t.equal(line, 'moved 5', 'one transaction of the migration');
    child.kill('SIGKILL');
    break;
  }
  await exited;
  await s.restart();
  const after = await Promise.all(['sortBy=name&sortOrder=asc', 'sortBy=created_at&sortOrder=desc'].map((q) => list(`pageSize=100&${q}`)));
  t.same(after, before, 'the same pages as before');
  await s.stop();
  await checkRepositories(t, s.dataDir, 'acme');
  await s.restart();
});

t.test('a filtered list reading thousands of records lets another request through before it ends', async (t) => {
  const N = 4000;
  for (let i = 0; i < N; i += 50) {
    const made = await Promise.all(Array.from({ length: Math.min(50, N - i) }, (_, j) => s.api('POST', '/acme/repos', { body: { name: `bulk-${i + j}` } })));
    if (made.some((r) => r.status !== 201)) throw new Error(`create: ${made.find((r) => r.status !== 201)!.status}`);
  }
  const token = await s.token();
  t.equal((await s.api('GET', '/acme/bulk-7', { token })).status, 200, 'the token is known to the server');
  const filter = encodeURIComponent('{"none":"such"}');
  const { slow: l, quick: r, quickFirst } = await answerOrder(s.api('GET', `/acme/repos/list?metadata=${filter}`, { token }), s.api('GET', '/acme/bulk-7', { token }));
  t.same({ list: l.status, total: l.json.total, read: r.status }, { list: 200, total: 0, read: 200 });
  t.ok(quickFirst, `the read was answered while the list read ${N} records`);
});

t.test('a filtered cursor page reads at most 100 records per item it may show, and paging finds every match', async (t) => {
  const token = await s.token();
  const found: string[] = [];
  let pages = 0;
  let short = 0;
  for (let cursor: string | null = null; ; ) {
    const res: Awaited<ReturnType<typeof s.api>> = await s.api('GET', `/acme/repos?limit=1&tags=${encodeURIComponent('{"n":"0"}')}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token });
    t.equal(res.status, 200);
    pages++;
    const names = (res.json.repos as Item[]).map((r) => r.name);
    found.push(...names);
    if (res.json.has_more && names.length === 0) short++;
    cursor = res.json.next_cursor as string | null;
    if (!cursor) break;
  }
  // Tagged n=0 and still there, newest first: past the 4,000 untagged repositories created after them.
  t.same(found, ['x-ray', 'A0', 'b-2']);
  t.ok(short >= 40, `${short} of ${pages} pages ended empty with a cursor`);
});
