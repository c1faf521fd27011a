import t from 'tap';
import { ROOT, applyOps, startWithRepo } from '../changes/helpers.js';
import { writeOp } from './read-helpers.js';

/**
 * The front end keeps small raw files for the next read of the same name; what a name shows
 * changes with every write, with the default bookmark and with `change_id`, and a kept file must
 * never answer for another of them.
 */
t.test('kept raw files - a repeated read follows writes, the default bookmark and change_id', async (t) => {
  const f = await startWithRepo(t);
  const raw = async (query: string): Promise<string> => {
    const res = await fetch(`${f.s.url}/v1${f.base}/content${query}`, { headers: { authorization: `Bearer ${await f.s.token()}`, accept: 'application/octet-stream' } });
    t.equal(res.status, 200, query);
    return Buffer.from(await res.arrayBuffer()).toString();
  };
  const first = await applyOps(f, { base_change_id: ROOT, ops: [writeOp('a.txt', 'one')], bookmarks: [{ name: 'main', create: true }] });
  t.equal(first.status, 201, first.text);
  const firstId = first.json.change.id as string;
  t.equal(await raw('?path=a.txt'), 'one');
  t.equal(await raw('?path=a.txt'), 'one', 'read twice: the same bytes (the second may come from the kept file)');

  const second = await applyOps(f, { base_change_id: firstId, ops: [writeOp('a.txt', 'two')], bookmarks: [{ name: 'main' }] });
  t.equal(second.status, 201, second.text);
  t.equal(await raw('?path=a.txt'), 'two', 'a write to the default bookmark is seen at once');
  t.equal(await raw(`?change_id=${firstId}&path=a.txt`), 'one', 'change_id names the older change');
  t.equal(await raw('?path=a.txt'), 'two', 'and a read of the bookmark is not answered with the older change');

  const other = await applyOps(f, { base_change_id: firstId, ops: [writeOp('a.txt', 'three')], bookmarks: [{ name: 'other', create: true }] });
  t.equal(other.status, 201, other.text);
  t.equal(await raw('?path=a.txt'), 'two', 'a write to another bookmark leaves the default one');
  const moved = await f.s.api('PATCH', f.base, { body: { default_bookmark: 'other' } });
  t.equal(moved.status, 200, moved.text);
  t.equal(await raw('?path=a.txt'), 'three', 'a new default bookmark is read from at once');
  t.equal(await raw(`?change_id=${firstId}&path=a.txt`), 'one');
});
