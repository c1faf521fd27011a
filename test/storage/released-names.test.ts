import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { IDEMPOTENCY_TTL_MS } from '../../src/storage/idempotency-store.js';
import { Ranges } from '../../src/storage/keys.js';
import { noteReleasedName, recentHoldersOf } from '../../src/storage/released-names.js';

/** The names repositories gave up, against a real LMDB environment. */
let dir: string;
let storage: Storage;

t.before(() => {
  dir = mkdtempSync(join(tmpdir(), 'repohost-released-names-'));
  storage = openStorage(dir);
});
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

const note = (name: string, repoId: string, at: number): void => storage.root.transactionSync(() => noteReleasedName(storage.meta, 'org1', name, repoId, at));

t.test('released names - holders of the last 24 h, any casing; older entries are dropped by the next release', async (t) => {
  const start = Date.now();
  note('Alpha', 'repo-a', start);
  note('alpha', 'repo-b', start + 1000);
  note('beta', 'repo-c', start);
  t.same(recentHoldersOf(storage.meta, 'org1', 'ALPHA', start + 2000).sort(), ['repo-a', 'repo-b']);
  t.same(recentHoldersOf(storage.meta, 'org2', 'alpha', start + 2000), [], 'per org');

  const later = start + IDEMPOTENCY_TTL_MS + 500;
  t.same(recentHoldersOf(storage.meta, 'org1', 'alpha', later), ['repo-b'], 'repo-a released more than 24 h ago');
  note('alpha', 'repo-d', later);
  t.same(recentHoldersOf(storage.meta, 'org1', 'alpha', later).sort(), ['repo-b', 'repo-d']);
  t.equal([...storage.meta.getKeys(Ranges.releasedNames('org1', 'alpha'))].length, 2, 'the expired entry is gone from storage');
  t.same(recentHoldersOf(storage.meta, 'org1', 'beta', start), ['repo-c'], 'another name keeps its own');
});
