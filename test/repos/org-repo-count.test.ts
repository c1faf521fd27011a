import t from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';
import { startTestServer } from '../helpers/server.js';

/**
 * `GET /{org}` reads the count of the org's repositories kept beside its list, instead of counting
 * the list. Creates, deletes, refusals and repeats keep it equal to the list; a data directory of
 * the layout before the count gets it when it is opened.
 */
const s = await startTestServer();
t.teardown(() => s.cleanup());

const numRepos = async (): Promise<number> => (await s.api('GET', '/acme')).json.num_repos as number;
const listed = async (): Promise<number> => (await s.api('GET', '/acme/repos/list?pageSize=1')).json.total as number;
const create = (name: string, headers?: Record<string, string>) => s.api('POST', '/acme/repos', { body: { name }, headers });
const storedCount = async (): Promise<unknown> => {
  const orgId = (await s.api('GET', '/acme')).json.id as string;
  await s.stop();
  const storage = openStorage(s.dataDir);
  try {
    return storage.meta.get(K.orgRepoCount(orgId));
  } finally {
    await storage.close();
  }
};

t.test('creates, deletes, refusals and repeats keep the count equal to the list', async (t) => {
  t.equal(await numRepos(), 0);
  for (const name of ['a', 'b', 'c', 'd', 'e']) t.equal((await create(name)).status, 201);
  t.equal((await create('a')).status, 409, 'a taken name is refused');
  const key = { 'idempotency-key': 'count-once' };
  t.equal((await create('f', key)).status, 201);
  t.equal((await create('f', key)).status, 201, 'a repeat is answered as the first');
  t.equal(await numRepos(), 6);
  t.equal((await s.api('DELETE', '/acme/b')).status, 200);
  t.equal((await s.api('DELETE', '/acme/b')).status, 404, 'a second delete finds nothing');
  t.equal((await s.api('PATCH', '/acme/c', { body: { name: 'c2' } })).status, 200, 'a rename');
  t.equal(await numRepos(), 5);

  // Creates and deletes at once: the count still ends equal to the list.
  const racing = await Promise.all([
    ...Array.from({ length: 12 }, (_, i) => create(`race-${i}`)),
    ...Array.from({ length: 6 }, () => create('race-same')),
    s.api('DELETE', '/acme/d'),
    s.api('DELETE', '/acme/e'),
  ]);
  t.equal(racing.filter((r) => r.status === 201).length, 13, 'one create of the same name wins');
  t.equal(await numRepos(), 16);
  t.equal(await numRepos(), await listed(), 'equal to the list');
  t.equal(await storedCount(), 16, 'kept in storage');
  await s.restart();
  t.equal(await numRepos(), 16, 'and after a restart');
});

for (const [what, stored] of [
  ['no count', undefined],
  ['a count an older build left stale', 5],
] as const) {
  t.test(`a data directory of layout 4 with ${what} is counted when it is opened`, async (t) => {
    const orgId = (await s.api('GET', '/acme')).json.id as string;
    await s.stop();
    const storage = openStorage(s.dataDir);
    if (stored === undefined) await storage.meta.remove(K.orgRepoCount(orgId));
    else await storage.meta.put(K.orgRepoCount(orgId), stored);
    await storage.meta.put(K.layoutVersion(), 4);
    await storage.close();
    await s.restart();
    t.equal(await numRepos(), 16, 'counted from the list');
    t.equal(await storedCount(), 16, 'and kept');
    await s.restart();
  });
}

t.test('the count follows the list after the migration', async (t) => {
  t.equal((await create('after-upgrade')).status, 201);
  t.equal(await numRepos(), 17);
  t.equal(await storedCount(), 17, 'kept from then on');
  await s.restart();
  t.equal((await s.api('DELETE', '/acme/after-upgrade')).status, 200);
  t.equal(await numRepos(), 16);
  t.equal(await numRepos(), await listed());
});

t.test('an org emptied before the upgrade, with a stale count, counts none after it', async (t) => {
  s.createOrg('emptied');
  const token = await s.token({ key: s.createKey({ scopes: ['admin'], org: 'emptied' }), issuer: 'emptied' });
  t.equal((await s.api('POST', '/emptied/repos', { token, body: { name: 'gone' } })).status, 201);
  t.equal((await s.api('DELETE', '/emptied/gone', { token })).status, 200);
  const orgId = (await s.api('GET', '/emptied', { token })).json.id as string;
  await s.stop();
  const storage = openStorage(s.dataDir);
  await storage.meta.put(K.orgRepoCount(orgId), 3);
  await storage.meta.put(K.layoutVersion(), 4);
  await storage.close();
  await s.restart();
  t.equal((await s.api('GET', '/emptied', { token })).json.num_repos, 0);
});

t.test('a restricted token counts the listed repositories it reaches, not a deleted one', async (t) => {
  const ids: string[] = [];
  for (const name of ['kept-1', 'kept-2', 'dropped']) ids.push((await create(name)).json.id as string);
  t.equal((await s.api('DELETE', '/acme/dropped')).status, 200);
  const token = await s.token({ repo_ids: ids });
  t.equal((await s.api('GET', '/acme', { token })).json.num_repos, 2);
  t.equal(await numRepos(), await listed(), 'the unrestricted count still equals the list');
});
