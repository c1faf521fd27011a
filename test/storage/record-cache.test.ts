import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Key } from 'lmdb';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';
import { RecordCache } from '../../src/storage/read/record-cache.js';

/**
 * The front end's record cache against a real LMDB environment. An actor's commit is modelled by
 * a write to LMDB while the call is in flight (what readers see between a worker's commit and its
 * reply), followed by a renewed read snapshot, as a later event-loop turn would have.
 */
let dir: string;
let storage: Storage;

t.before(() => {
  dir = mkdtempSync(join(tmpdir(), 'repohost-record-cache-'));
  storage = openStorage(dir);
});
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

function commit(key: Key, value: unknown): void {
  storage.meta.putSync(key, value);
  storage.root.resetReadTxn();
}

t.test('a write committed while its call is in flight is read at once, not the cached value', async (t) => {
  const cache = new RecordCache(storage.meta);
  const key = K.latestSync('repo_A');
  commit(key, { status: 'in_progress' });
  t.same(cache.get(key), { status: 'in_progress' });

  cache.dispatched('repo:repo_A');
  commit(key, { status: 'completed' });
  t.same(cache.get(key), { status: 'completed' }, 'visible before the call settles');
  commit(key, { status: 'failed' });
  t.same(cache.get(key), { status: 'failed' }, 'nothing was cached while the call was in flight');
  cache.settled('repo:repo_A');
  t.same(cache.get(key), { status: 'failed' });
});

t.test('a repository stays uncached until the last of its calls in flight settles', async (t) => {
  const cache = new RecordCache(storage.meta);
  const key = K.repo('repo_B');
  commit(key, { name: 'one' });
  cache.dispatched('repo:repo_B');
  cache.dispatched('repo:repo_B');
  cache.settled('repo:repo_B');
  commit(key, { name: 'two' });
  t.same(cache.get(key), { name: 'two' }, 'the second call may still commit');
  cache.settled('repo:repo_B');
  t.same(cache.get(key), { name: 'two' });
});

t.test('an org call in flight makes every repository record read afresh, and the org names', async (t) => {
  const cache = new RecordCache(storage.meta);
  const record = K.repo('repo_C');
  const name = K.repoName('org_X', 'c');
  commit(record, { name: 'c' });
  commit(name, 'repo_C');
  t.same(cache.get(record), { name: 'c' });
  t.equal(cache.get(name), 'repo_C');

  cache.dispatched('org:org_X');
  commit(record, { name: 'renamed' });
  storage.meta.removeSync(name);
  storage.root.resetReadTxn();
  t.same(cache.get(record), { name: 'renamed' }, 'a rename by the org actor is visible before it settles');
  t.equal(cache.get(name), undefined, 'so is the old name going away');
  cache.settled('org:org_X');
  t.same(cache.get(record), { name: 'renamed' });
});

t.test('with no call in flight, a record is decoded once and kept until a call to its actor settles', async (t) => {
  const cache = new RecordCache(storage.meta);
  const key = K.bookmark('repo_D', 'main');
  commit(key, { target: 'a' });
  const first = cache.get(key);
  t.equal(cache.get(key), first, 'the same decoded value');
  t.ok(Object.isFrozen(first), 'shared values are frozen');
  cache.dispatched('repo:repo_E');
  cache.settled('repo:repo_E');
  t.equal(cache.get(key), first, 'another repository settling keeps it');
  commit(key, { target: 'b' });
  cache.dispatched('repo:repo_D');
  cache.settled('repo:repo_D');
  t.same(cache.get(key), { target: 'b' });
});

t.test('an org with many repository names keeps them all cached; a settled org call drops them', async (t) => {
  // Counts the reads that reach LMDB: a cached name costs none.
  let reads = 0;
  const meta = new Proxy(storage.meta, {
    get(target, prop, receiver) {
      if (prop === 'get') return (key: Key) => (reads++, target.get(key));
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  const cache = new RecordCache(meta);
  const names = Array.from({ length: 10_000 }, (_, i) => `repo-${i}`);
  for (const name of names) storage.meta.putSync(K.repoName('org_many', name), `id-${name}`);
  storage.root.resetReadTxn();
  for (const name of names) cache.get(K.repoName('org_many', name));
  t.equal(reads, names.length, 'each name read from LMDB once');
  for (const name of names) t.equal(cache.get(K.repoName('org_many', name)), `id-${name}`);
  t.equal(reads, names.length, 'all 10,000 served from the cache the second time');
  cache.dispatched('org:org_many');
  cache.settled('org:org_many');
  cache.get(K.repoName('org_many', names[0]!));
  t.equal(reads, names.length + 1, 'an org call that settled may have renamed any of them: read afresh');
});
