import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { metricValue } from '../helpers/metrics-text.js';

/** Races through HTTP: one name claimed by many at once, many names at once, and group commit. */
const s = await serverForFile(t, { workers: 2 });

t.test('concurrency - 50 parallel creates of one name in mixed casing: exactly one 201, the rest 409', async (t) => {
  const token = await s.token();
  const casings = ['race', 'RACE', 'Race', 'rAcE', 'raCE'];
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => s.api('POST', '/acme/repos', { token, body: { name: casings[i % casings.length] } })));
  const created = results.filter((r) => r.status === 201);
  const refused = results.filter((r) => r.status === 409);
  t.equal(created.length, 1, 'one winner');
  t.equal(refused.length, 49, 'every other request is a conflict');
  t.ok(refused.every((r) => r.json.error.code === 'REPO_EXISTS'));
  const winner = created[0]!.json.name as string;
  t.ok(refused.every((r) => r.json.error.message.includes(`"${winner}"`)), 'conflicts name the winner with its casing');
  const list = await s.api('GET', '/acme/repos?limit=100', { token });
  t.equal(list.json.repos.filter((r: { name: string }) => r.name.toLowerCase() === 'race').length, 1);
  t.equal((await s.api('GET', '/acme/RACE', { token })).json.name, winner, 'original casing kept');
});

t.test('concurrency - 200 parallel creates of distinct names all succeed, several per LMDB transaction', async (t) => {
  const before = await s.metrics();
  const sum0 = metricValue(before, 'repohost_actor_batch_size_sum') || 0;
  const count0 = metricValue(before, 'repohost_actor_batch_size_count') || 0;
  const token = await s.token();
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => s.api('POST', '/acme/repos', { token, body: { name: `distinct-${i}` } })));
  t.same([...new Set(results.map((r) => r.status))], [201], 'all 201');
  t.equal(new Set(results.map((r) => r.json.id)).size, 200, '200 distinct repositories');
  const list = await s.api('GET', '/acme/repos/list?pageSize=100&sortBy=name', { token });
  t.equal(list.json.total, 201);
  for (const r of results.slice(0, 20)) t.equal((await s.api('GET', `/acme/${r.json.name}`, { token })).status, 200, 'readable right after the 201');

  const after = await s.metrics();
  const writes = metricValue(after, 'repohost_actor_batch_size_sum') - sum0;
  const batches = metricValue(after, 'repohost_actor_batch_size_count') - count0;
  // A create is three actor commands (reserve and confirm on the org's shard, init on the repository's).
  t.equal(writes, 600, 'the batch-size histogram saw every step of every create');
  t.ok(batches < writes, `${writes} writes in ${batches} transactions (${(writes / batches).toFixed(1)} per transaction)`);
  t.ok(writes / batches > 1, 'more than one write per LMDB transaction on average');
});

t.test('concurrency - parallel renames of one repository all apply, one after another, and one name is left', async (t) => {
  const token = await s.token();
  const made = await s.api('POST', '/acme/repos', { token, body: { name: 'spin-0' } });
  t.equal(made.status, 201);
  const names = Array.from({ length: 8 }, (_, i) => `spin-${i + 1}`);
  const results = await Promise.all(names.map((name) => s.api('PATCH', '/acme/spin-0', { token, body: { name } })));
  t.same([...new Set(results.map((r) => r.status))], [200], 'every rename answered 200');
  const found = await Promise.all(['spin-0', ...names].map(async (name) => ({ name, status: (await s.api('GET', `/acme/${name}`, { token })).status })));
  const live = found.filter((f) => f.status === 200).map((f) => f.name);
  t.equal(live.length, 1, `exactly one name finds the repository (${live.join(', ')})`);
  t.not(live[0], 'spin-0', 'and it is one of the new names');
  const listed = (await s.api('GET', '/acme/repos?limit=100', { token })).json.repos.filter((r: { id: string }) => r.id === made.json.id);
  t.same(listed.map((r: { name: string }) => r.name), live, 'the list shows it once, under that name');
  for (const name of ['spin-0', ...names].filter((n) => n !== live[0])) t.equal((await s.api('POST', '/acme/repos', { token, body: { name } })).status, 201, `${name} is free`);
});

t.test('concurrency - a delete racing renames removes the repository under whatever name it has', async (t) => {
  const token = await s.token();
  t.equal((await s.api('POST', '/acme/repos', { token, body: { name: 'race-del' } })).status, 201);
  const [del, ...renames] = await Promise.all([
    s.api('DELETE', '/acme/race-del', { token }),
    ...[1, 2, 3].map((i) => s.api('PATCH', '/acme/race-del', { token, body: { name: `race-del-${i}` } })),
  ]);
  t.equal(del.status, 200, 'the delete succeeds');
  t.ok(renames.every((r) => r.status === 200 || r.status === 404), `renames: ${renames.map((r) => r.status).join(', ')}`);
  for (const name of ['race-del', 'race-del-1', 'race-del-2', 'race-del-3']) t.equal((await s.api('GET', `/acme/${name}`, { token })).status, 404, `${name} finds nothing`);
});
