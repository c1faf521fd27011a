import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOrg, createSigningKey } from '../../src/storage/admin-store.js';
import { openStorage } from '../../src/storage/database.js';
import { newId } from '../../src/storage/ids.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { allRepoIds } from '../../src/storage/repo-store.js';
import { beginSaga, finishSaga, type RepoSagaRecord } from '../../src/storage/repo-saga-store.js';
import { directoryBehaviour, target } from '../helpers/org-directory-behaviour.js';

/**
 * The local org directory on a real LMDB environment: what its version promises to the readers
 * that cache by it, and that a write made inside a caller's transaction lives and dies with it
 * (the org actor's target commands rely on that).
 */
const dir = mkdtempSync(join(tmpdir(), 'repohost-directory-'));
const storage = openStorage(dir);
const directory = new LmdbOrgDirectory(storage);
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

directoryBehaviour(t, directory, storage, 'local');

t.test('org directory - a write inside a transaction that rolls back leaves no record and no version', async (t) => {
  const org = createOrg(directory, 'rolled-back');
  const before = directory.version();
  const hook = target(org.id, 'never');
  t.throws(() =>
    storage.root.transactionSync(() => {
      directory.putTarget(hook);
      t.ok(directory.mayHaveTargets(org.id), 'the caller sees its write inside its transaction');
      throw new Error('the command fails after the write');
    }),
  );
  t.equal(directory.target(org.id, hook.id), undefined);
  t.notOk(directory.mayHaveTargets(org.id), 'an org without targets keeps no events');
  t.equal(directory.version(), before);
});

t.test('repository walk - every org\'s repositories, whatever else the orgs hold', async (t) => {
  const walked = mkdtempSync(join(tmpdir(), 'repohost-walk-'));
  const s = openStorage(walked);
  const d = new LmdbOrgDirectory(s);
  t.teardown(async () => {
    await s.close();
    rmSync(walked, { recursive: true, force: true });
  });
  const expected: string[] = [];
  for (const slug of ['one', 'two', 'three']) {
    const org = createOrg(d, slug);
    // Keys and targets sit beside the repository list under the org's own prefix.
    createSigningKey(d, s, slug, { scopes: ['read'] });
    d.putTarget(target(org.id, slug));
    if (slug === 'two') continue;
    s.root.transactionSync(() => {
      for (let i = 0; i < 2; i++) {
        const saga: RepoSagaRecord = { id: newId('saga'), kind: 'create', org_id: org.id, repo_id: newId('repo'), name: `${slug}-${i}`, from: null, at: new Date().toISOString() };
        beginSaga(s.meta, saga);
        finishSaga(s.meta, saga);
        expected.push(saga.repo_id);
      }
    });
  }
  t.same([...allRepoIds(s.meta)].sort(), expected.sort());
});
