import t from 'tap';
import { cleanupWork, createRepo, enqueue, makeUpstream, passwordAuth, startSyncEnv, waitForSync, type SyncEnv, type Upstream } from './fixtures.js';

let env: SyncEnv;
let up: Upstream;
t.before(async () => {
  env = await startSyncEnv();
  up = await makeUpstream(env.git, 'routes');
});
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});

t.test('routes - a repository without upstream cannot sync; bad bodies are refused', async (t) => {
  await createRepo(env.s, 'plain', null);
  const noUpstream = await env.s.api('POST', '/acme/plain/upstream/syncs', { body: { direction: 'pull' } });
  t.equal(noUpstream.status, 400);
  t.equal(noUpstream.json.error.code, 'INVALID_REQUEST');
  t.equal((await env.s.api('POST', '/acme/plain/push')).status, 400);

  await createRepo(env.s, 'valid', { url: up.url, auth: passwordAuth });
  for (const body of [{}, { direction: 'sideways' }, { direction: 'pull', extra: 1 }, { direction: 'pull', ref_globs: { branches: '' } }, { direction: 'pull', ref_globs: { heads: '*' } }]) {
    const res = await env.s.api('POST', '/acme/valid/upstream/syncs', { body });
    t.equal(res.status, 400, JSON.stringify(body));
  }
  t.equal((await env.s.api('POST', '/acme/valid/push', { body: { direction: 'pull' } })).status, 400, 'push takes no body fields');
  const nulls = await env.s.api('POST', '/acme/valid/upstream/syncs', { body: { direction: 'pull', ref_globs: { branches: null, tags: 'v*' } } });
  t.equal(nulls.status, 201);
  t.same(nulls.json.ref_globs, { branches: '*', tags: 'v*' });
  const pushed = await env.s.api('POST', '/acme/valid/push', { body: {} });
  t.equal(pushed.status, 201);
  t.equal(pushed.json.direction, 'push');
  t.equal((await env.s.api('GET', '/acme/valid/upstream/syncs/sync_01NOPE')).json.error.code, 'NOT_FOUND');
  t.equal((await env.s.api('GET', '/acme/valid/upstream/syncs/sync_01NOPE')).status, 404);
});

t.test('routes - lists are newest first with cursors; sync-runs spans the org without ref_globs', async (t) => {
  await createRepo(env.s, 'listed', { url: up.url, auth: passwordAuth });
  await createRepo(env.s, 'other', { url: up.url, auth: passwordAuth });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await enqueue(env.s, 'listed', { direction: i % 2 ? 'push' : 'pull' })).id);
  const otherId = (await enqueue(env.s, 'other')).id;
  for (const id of ids) await waitForSync(env.s, 'listed', id);
  await waitForSync(env.s, 'other', otherId);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await env.s.api('GET', `/acme/listed/upstream/syncs?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    t.ok(res.json.syncs.length <= 2);
    seen.push(...res.json.syncs.map((s: any) => s.id));
    cursor = res.json.next_cursor;
    t.equal(res.json.has_more, cursor !== null);
  } while (cursor);
  t.same(seen, [...ids].reverse(), 'every sync once, newest first');
  t.equal((await env.s.api('GET', '/acme/listed/upstream/syncs?limit=201')).status, 400);
  t.equal((await env.s.api('GET', '/acme/listed/upstream/syncs?cursor=%%%')).status, 400);

  const runs = await env.s.api('GET', '/acme/sync-runs?limit=100');
  t.equal(runs.status, 200);
  const runIds = runs.json.sync_runs.map((r: any) => r.id);
  t.ok(runIds.includes(otherId) && ids.every((id) => runIds.includes(id)));
  t.ok(runs.json.sync_runs.every((r: any) => !('ref_globs' in r)), 'no ref_globs in sync runs');
  t.same([...runIds].sort().reverse(), runIds, 'newest first');
  // The org's runs are kept per shard (each repository's on its own): cursor pages merge them.
  const pagedRuns: string[] = [];
  cursor = null;
  do {
    const res: { json: any } = await env.s.api('GET', `/acme/sync-runs?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    pagedRuns.push(...res.json.sync_runs.map((r: any) => r.id));
    cursor = res.json.next_cursor;
  } while (cursor);
  t.same(pagedRuns, runIds, 'cursor pages of two add up to the list');
  const filtered = await env.s.api('GET', '/acme/sync-runs?repo=LISTED&limit=3');
  t.same(filtered.json.sync_runs.map((r: any) => r.id), [...ids].reverse().slice(0, 3), 'by current name, case-insensitively');
  t.equal(filtered.json.has_more, true);
  const next = await env.s.api('GET', `/acme/sync-runs?repo=listed&limit=3&cursor=${filtered.json.next_cursor}`);
  t.same(next.json.sync_runs.map((r: any) => r.id), [...ids].reverse().slice(3));
  t.same((await env.s.api('GET', '/acme/sync-runs?repo=nothing')).json.sync_runs, []);
  t.equal((await env.s.api('GET', '/acme/sync-runs?limit=101')).status, 400);
  t.equal((await env.s.api('GET', '/acme/sync-runs?bogus=1')).status, 400);
  const empty = await env.s.api('GET', '/acme/sync-runs?repo=');
  t.equal(empty.status, 400, 'an empty repo filter names no repository');
  t.match(empty.json.error.message, /"repo" must not be empty/);

  // Renamed: the filter follows the current name.
  t.equal((await env.s.api('PATCH', '/acme/other', { body: { name: 'renamed-other' } })).status, 200);
  t.same((await env.s.api('GET', '/acme/sync-runs?repo=renamed-other')).json.sync_runs.map((r: any) => r.id), [otherId]);
});

t.test('routes - scopes: reads need git:read, writes git:write; restricted tokens see only their repositories', async (t) => {
  await createRepo(env.s, 'scoped-a', { url: up.url, auth: passwordAuth });
  await createRepo(env.s, 'scoped-b', { url: up.url, auth: passwordAuth });
  const a = (await enqueue(env.s, 'scoped-a')).id;
  const b = (await enqueue(env.s, 'scoped-b')).id;
  const reader = await env.s.token({ scopes: ['git:read'] });
  const metaOnly = await env.s.token({ scopes: ['repo:read'] });
  const writer = await env.s.token({ scopes: ['git:write'] });
  t.equal((await env.s.api('GET', '/acme/scoped-a/upstream/syncs', { token: reader })).status, 200);
  t.equal((await env.s.api('GET', `/acme/scoped-a/upstream/syncs/${a}`, { token: reader })).status, 200);
  t.equal((await env.s.api('GET', '/acme/sync-runs', { token: reader })).status, 200);
  t.equal((await env.s.api('POST', '/acme/scoped-a/upstream/syncs', { token: reader, body: { direction: 'pull' } })).status, 403);
  t.equal((await env.s.api('POST', '/acme/scoped-a/push', { token: reader })).status, 403);
  t.equal((await env.s.api('GET', '/acme/scoped-a/upstream/syncs', { token: metaOnly })).status, 403);
  t.equal((await env.s.api('GET', '/acme/sync-runs', { token: metaOnly })).status, 403);
  t.equal((await env.s.api('POST', '/acme/scoped-a/push', { token: writer })).status, 201);

  const restricted = await env.s.token({ scopes: ['read'], repos: ['acme/scoped-a'] });
  const runs = await env.s.api('GET', '/acme/sync-runs?limit=100', { token: restricted });
  const repoIds = new Set(runs.json.sync_runs.map((r: any) => r.repo_id));
  t.equal(repoIds.size, 1, 'only the allowed repository');
  t.ok(runs.json.sync_runs.some((r: any) => r.id === a));
  t.notOk(runs.json.sync_runs.some((r: any) => r.id === b));
  t.same((await env.s.api('GET', '/acme/sync-runs?repo=scoped-b', { token: restricted })).json.sync_runs, []);
  t.equal((await env.s.api('GET', `/acme/scoped-b/upstream/syncs/${b}`, { token: restricted })).status, 403);
});

t.test('routes - the repository shows the latest sync; the list item shows its status', async (t) => {
  const created = await createRepo(env.s, 'status', { url: up.url, auth: passwordAuth });
  t.equal(created.upstream.latest_sync, null);
  const item = async (): Promise<any> => (await env.s.api('GET', '/acme/repos/list?pageSize=100')).json.repos.find((r: any) => r.name === 'status').upstream;
  t.same(await item(), { uri: up.url, status: 'never' });
  const hold = env.git.hold((r) => r.service === 'git-upload-pack');
  const queued = await enqueue(env.s, 'status');
  await hold.held;
  t.equal((await item()).status, 'syncing');
  const during = (await env.s.api('GET', '/acme/status')).json.upstream.latest_sync;
  t.equal(during.id, queued.id);
  t.equal(during.status, 'in_progress');
  hold.release();
  await waitForSync(env.s, 'status', queued.id);
  t.equal((await item()).status, 'synced');
  const after = (await env.s.api('GET', '/acme/status')).json.upstream.latest_sync;
  t.equal(after.status, 'completed');
  t.ok(after.stats.refs.length > 0);
});

t.test('routes - deleting a repository removes its syncs everywhere', async (t) => {
  await createRepo(env.s, 'doomed', { url: up.url, auth: passwordAuth });
  const id = (await enqueue(env.s, 'doomed')).id;
  await waitForSync(env.s, 'doomed', id);
  t.ok((await env.s.api('GET', '/acme/sync-runs?limit=100')).json.sync_runs.some((r: any) => r.id === id));
  t.equal((await env.s.api('DELETE', '/acme/doomed')).status, 200);
  t.notOk((await env.s.api('GET', '/acme/sync-runs?limit=100')).json.sync_runs.some((r: any) => r.id === id));
  await createRepo(env.s, 'doomed', null);
  t.same((await env.s.api('GET', '/acme/doomed/upstream/syncs')).json.syncs, [], 'a new repository of the same name starts empty');
});

t.test('routes - the address policy applies at connection time too', async (t) => {
  // Saved while private upstreams were allowed; the server then restarts with them refused.
  await createRepo(env.s, 'policy', { url: up.url.replace('127.0.0.1', 'localhost'), auth: passwordAuth });
  await env.s.stop();
  const { startTestServer } = await import('../helpers/server.js');
  const strict = await startTestServer({ dataDir: env.s.dataDir, env: { REPOHOST_ALLOW_PRIVATE_UPSTREAMS: '0' } });
  t.teardown(() => strict.stop());
  const before = env.git.requests.length;
  const res = await strict.api('POST', '/acme/policy/upstream/syncs', { body: { direction: 'pull' } });
  t.equal(res.status, 201);
  const sync = await waitForSync(strict, 'policy', res.json.id);
  t.equal(sync.status, 'failed');
  t.equal(sync.attempt, 1);
  t.match(sync.error, /private or loopback/);
  t.equal(env.git.requests.length, before, 'no request reached the upstream');
});
