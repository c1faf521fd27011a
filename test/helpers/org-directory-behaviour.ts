import type { Test } from 'tap';
import { isServiceError } from '../../src/errors.js';
import { createOrg, createSigningKey, setKeyStatus } from '../../src/storage/admin-store.js';
import type { Storage } from '../../src/storage/database.js';
import { newId } from '../../src/storage/ids.js';
import type { OrgDirectory } from '../../src/storage/org-directory.js';
import type { WebhookTargetRecord } from '../../src/storage/webhook-store.js';

/**
 * What every org directory promises its readers, run on each implementation (the local one in
 * test/storage, the etcd one in test/cluster). A write counts once `flush()` settles, as for the
 * CLI; a refused write throws at once or from `flush()`. `slugPrefix` keeps runs apart.
 */
export function directoryBehaviour(t: Test, directory: OrgDirectory, storage: Storage, slugPrefix: string): void {
  const slug = (s: string): string => `${slugPrefix}-${s}`;
  const write = async <T>(fn: () => T): Promise<T> => {
    const result = fn();
    await directory.flush();
    return result;
  };
  const refused = async (fn: () => unknown): Promise<unknown> => {
    try {
      fn();
      await directory.flush();
    } catch (err) {
      return err;
    }
    return undefined;
  };

  t.test('org directory - every write moves the version, a refused one does not', async (t) => {
    const moved = async (what: string, fn: () => unknown): Promise<void> => {
      const before = directory.version();
      await write(fn);
      t.ok(directory.version() > before, what);
    };
    const unmoved = async (what: string, fn: () => unknown): Promise<void> => {
      const before = directory.version();
      t.ok(await refused(fn), `${what} is refused`);
      t.equal(directory.version(), before, `${what}: the version stays`);
    };
    let org = await write(() => createOrg(directory, slug('versioned')));
    await moved('an org', () => (org = createOrg(directory, slug('versioned-two'))));
    await unmoved('a taken slug', () => createOrg(directory, slug('versioned-two')));
    const key = (await write(() => createSigningKey(directory, storage, org.slug, { scopes: ['read'] }))).record;
    await moved('a key status', () => setKeyStatus(directory, key.id, 'revoked'));
    await unmoved('a revoked key enabled again', () => setKeyStatus(directory, key.id, 'active'));
    t.equal(directory.key(key.id)?.status, 'revoked', 'a change that throws leaves the key as it was');
    const hook = target(org.id, 'hook');
    await moved('a new target', () => directory.putTarget(hook));
    await moved('a changed target', () => directory.putTarget({ ...hook, url: 'https://93.184.215.14/other' }));
    t.equal(directory.target(org.id, hook.id)?.url, 'https://93.184.215.14/other');
    await moved('a removed target', () => directory.removeTarget(org.id, hook.id));
    t.equal(directory.target(org.id, hook.id), undefined);
    t.same(directory.targets(org.id), []);
  });

  t.test("org directory - lists: orgs, an org's keys, targets in creation order", async (t) => {
    const org = await write(() => createOrg(directory, slug('listed')));
    const keys = [
      (await write(() => createSigningKey(directory, storage, org.slug, { scopes: ['read'] }))).record,
      (await write(() => createSigningKey(directory, storage, org.slug, { scopes: ['admin'] }))).record,
    ];
    t.same(directory.orgKeys(org.id).map((k) => k.id).sort(), keys.map((k) => k.id).sort());
    t.ok([...directory.orgs()].some((o) => o.id === org.id));
    t.equal(directory.orgBySlug(org.slug)?.id, org.id);
    const made = ['a', 'b', 'c'].map((name) => target(org.id, name));
    for (const m of made) await write(() => directory.putTarget(m));
    t.same(directory.targets(org.id).map((x) => x.name), ['a', 'b', 'c']);
    const err = await refused(() => directory.updateKey('key_missing', () => undefined));
    t.ok(isServiceError(err) && err.code === 'NOT_FOUND', 'an unknown key is NOT_FOUND');
  });

  t.test('org directory - a record read is a copy: changing it changes nothing stored', async (t) => {
    const org = await write(() => createOrg(directory, slug('copied')));
    const hook = target(org.id, 'kept');
    await write(() => directory.putTarget(hook));
    const read = directory.target(org.id, hook.id)!;
    read.url = 'https://93.184.215.14/changed';
    t.equal(directory.target(org.id, hook.id)?.url, hook.url);
  });
}

export function target(orgId: string, name: string): WebhookTargetRecord {
  const now = new Date().toISOString();
  return { id: newId('wht'), org_id: orgId, name, url: 'https://93.184.215.14/hook', events: ['push'], repo_ids: null, sealed_secret: 'sealed', created_at: now, updated_at: now };
}
