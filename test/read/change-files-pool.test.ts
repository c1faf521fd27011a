import t from 'tap';
import { answerOrder } from '../helpers/answer-order.js';
import { startTestServer } from '../helpers/server.js';

/**
 * `GET …/changes/{change_id}` lists every file the change touched against its first parent: for a
 * repository's first import, every file. That walk runs on the read pool, so the front end
 * answers other requests while it runs.
 */
const s = await startTestServer();
t.teardown(() => s.cleanup());

const ROOT = 'z'.repeat(32);
const FILES = 10_000;

t.test('a change of 10,000 files is listed whole, and a read beside it is answered first', async (t) => {
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'imported' } })).status, 201);
  const ops = Array.from({ length: FILES }, (_, i) => ({ op: 'write', path: `d${i % 50}/e${i % 7}/f-${i}.txt`, content: `file ${i}\n` }));
  const made = await s.api('POST', '/acme/imported/apply-ops', { body: { base_change_id: ROOT, ops, bookmarks: [{ name: 'main' }] } });
  t.equal(made.status, 201);
  const changeId = made.json.change.id as string;
  const token = await s.token();
  t.equal((await s.api('GET', '/acme/imported', { token })).status, 200, 'the token is known to the server');
  t.equal((await s.api('GET', `/acme/imported/changes/${changeId}`, { token })).status, 200, 'the read pool has started');
  const { slow: d, quick: r, quickFirst } = await answerOrder(s.api('GET', `/acme/imported/changes/${changeId}`, { token }), s.api('GET', '/acme/imported', { token }));
  t.equal(r.status, 200);
  t.equal(d.status, 200);
  t.equal(d.json.id, changeId);
  t.equal(d.json.files.length, FILES, 'every file of the import');
  t.same(d.json.conflicts, []);
  t.ok(d.json.files.includes('d3/e3/f-3.txt'));
  t.ok(quickFirst, 'the read did not wait for the walk');
  const missing = await s.api('GET', `/acme/imported/changes/${'k'.repeat(32)}`, { token });
  t.equal(missing.status, 404);
  t.equal(missing.json.error.code, 'CHANGE_NOT_FOUND');
});
