import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isServiceError } from '../../src/errors.js';
import { createOrg, createSigningKey, setKeyStatus } from '../../src/storage/admin-store.js';
import { openStorage } from '../../src/storage/database.js';
import { newId } from '../../src/storage/ids.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { allRepoIds } from '../../src/storage/repo-store.js';
import { beginSaga, finishSaga, type RepoSagaRecord } from '../../src/storage/repo-saga-store.js';
import type { WebhookTargetRecord } from '../../src/storage/webhook-store.js';

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

function target(orgId: string, name: string): WebhookTargetRecord {
  const now = new Date().toISOString();
  return { id: newId('wht'), org_id: orgId, name, url: 'https://93.184.215.14/hook', events: ['push'], repo_ids: null, sealed_secret: 'sealed', created_at: now, updated_at: now };
}

t.test('org directory - every write moves the version, a refused one does not', async (t) => {
  const moved = (what: string, write: () => unknown): void => {
    const before = directory.version();
    write();
    t.ok(directory.version() > before, what);
  };
  const unmoved = (what: string, write: () => unknown): void => {
    const before = directory.version();
    t.throws(write, what);
    t.equal(directory.version(), before, `${what}: the version stays`);
  };
  let org = createOrg(directory, 'versioned');
  moved('an org', () => (org = createOrg(directory, 'versioned-two')));
  unmoved('a taken slug', () => createOrg(directory, 'versioned-two'));
  const key = createSigningKey(directory, storage, org.slug, { scopes: ['read'] }).record;
  moved('a key status', () => setKeyStatus(directory, key.id, 'revoked'));
  unmoved('a revoked key enabled again', () => setKeyStatus(directory, key.id, 'active'));
  t.equal(directory.key(key.id)?.status, 'revoked', 'a change that throws leaves the key as it was');
  const hook = target(org.id, 'hook');
  moved('a new target', () => directory.putTarget(hook));
  moved('a changed target', () => directory.putTarget({ ...hook, url: 'https://93.184.215.14/other' }));
  t.equal(directory.target(org.id, hook.id)?.url, 'https://93.184.215.14/other');
  moved('a removed target', () => directory.removeTarget(org.id, hook.id));
  t.equal(directory.target(org.id, hook.id), undefined);
  t.notOk(directory.hasTargets(org.id));
});

t.test('org directory - a write inside a transaction that rolls back leaves no record and no version', async (t) => {
  const org = createOrg(directory, 'rolled-back');
  const before = directory.version();
  const hook = target(org.id, 'never');
  t.throws(() =>
    storage.root.transactionSync(() => {
      directory.putTarget(hook);
      t.ok(directory.hasTargets(org.id), 'the caller sees its write inside its transaction');
      throw new Error('the command fails after the write');
    }),
  );
  t.equal(directory.target(org.id, hook.id), undefined);
  t.notOk(directory.hasTargets(org.id));
  t.equal(directory.version(), before);
});

t.test('org directory - lists: orgs, an org\'s keys, targets in creation order', async (t) => {
  const org = createOrg(directory, 'listed');
  const keys = [createSigningKey(directory, storage, 'listed', { scopes: ['read'] }).record, createSigningKey(directory, storage, 'listed', { scopes: ['admin'] }).record];
  t.same(directory.orgKeys(org.id).map((k) => k.id).sort(), keys.map((k) => k.id).sort());
  t.ok([...directory.orgs()].some((o) => o.id === org.id));
  t.equal(directory.orgBySlug('listed')?.id, org.id);
  const made = ['a', 'b', 'c'].map((name) => target(org.id, name));
  for (const m of made) directory.putTarget(m);
  t.same(directory.targets(org.id).map((x) => x.name), ['a', 'b', 'c']);
  const err = t.throws(() => directory.updateKey('key_missing', () => undefined)) as unknown;
  t.ok(isServiceError(err) && err.code === 'NOT_FOUND', 'an unknown key is NOT_FOUND');
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
