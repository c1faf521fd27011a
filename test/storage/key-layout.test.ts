import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Key } from 'lmdb';
import { orgActor, repoActor } from '../../src/actors/actor-names.js';
import { SHARD_COUNT, shardOf } from '../../src/actors/shard-map.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { encodeInlineObject } from '../../src/storage/git-object-store.js';
import { K, Ranges, type KeyRange } from '../../src/storage/keys.js';
import { ObjectReader } from '../../src/storage/read/object-reader.js';
import { orgShard, repoShard } from '../../src/storage/shards.js';

/**
 * The per-shard key layout: every key a shard owns sorts inside that shard's range (so a shard is
 * one contiguous range in each database), global keys sort after every shard, and the encoded
 * object key prefix the hot readers use names the same bytes lmdb-js writes.
 */
let dir: string;
let storage: Storage;
t.before(() => {
  dir = mkdtempSync(join(tmpdir(), 'repohost-key-layout-'));
  storage = openStorage(dir);
});
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

const REPOS = ['repo_01JZZZZZZZZZZZZZZZZZZZZZZ0', 'repo_01JAAAAAAAAAAAAAAAAAAAAAA1', 'repo_01M8EV46RZ7TABSPW1YB7YA64B', 'repo_x'];
const OID = 'ab'.repeat(20);

/** Whether LMDB, holding `key`, finds it inside `range` (the real order of encoded keys). */
function holds(db: Storage['meta'], range: KeyRange, key: Key): boolean {
  for (const found of db.getKeys(range)) if (JSON.stringify(found) === JSON.stringify(key)) return true;
  return false;
}

t.test('every key of a repository sorts inside its shard, org-shard keys inside the org shard, global keys after all shards', async (t) => {
  const shards = new Set(REPOS.map(repoShard));
  t.ok(shards.size > 1, 'the repositories span several shards');
  for (const repoId of REPOS) {
    const shard = repoShard(repoId);
    const owned = [
      K.repo(repoId), K.bookmark(repoId, 'main'), K.operation(repoId, 'op_1'), K.change(repoId, 'c'), K.commit(repoId, OID), K.evolution(repoId, 'c', 'e'),
      K.child(repoId, 'p', 'c'), K.fileMeta(repoId, 'a/b'), K.latestSync(repoId), K.analytics(repoId), K.analyticsState(repoId), K.analyticsCommit(repoId, OID),
      K.sync(repoId, 's'), K.tag(repoId, 'v1'), K.notes(repoId, 'n'), K.repoBytes(repoId), K.pending(repoId, OID), K.stagedUpload(repoId, 'upl_1'), K.repoSyncIndex(repoId, 's'), K.orgSync('org_1', repoId, 's'), K.syncQueue(repoId, 's'), K.repoSagaFence(repoId), K.quotaAllowance(shard, 'org_1'), K.idempotency(shard, 'key_1', 'k'),
      K.outbox(shard, 'evt_1'), K.webhookDelivery(shard, 'wht_1', 'dlv_1'), K.webhookPending(shard, 'wht_1', repoId, 'dlv_1'),
    ];
    for (const key of owned) storage.meta.putSync(key, true);
    storage.objects.putSync(K.object(repoId, OID), Buffer.from('x'));
    storage.chunks.putSync(K.chunk(repoId, 'upl_1', 0), Buffer.from('x'));
    for (const key of owned) t.ok(holds(storage.meta, Ranges.shard(shard), key), `${JSON.stringify(key)} in shard ${shard}`);
    t.ok(holds(storage.objects, Ranges.shard(shard), K.object(repoId, OID)), 'its object');
    t.ok(holds(storage.chunks, Ranges.shard(shard), K.chunk(repoId, 'upl_1', 0)), 'its chunk');
    t.ok(holds(storage.meta, Ranges.repoOwned(repoId), K.bookmark(repoId, 'main')), 'inside its own range');
    t.notOk(holds(storage.meta, Ranges.repoOwned(repoId), K.repo(repoId)), 'the record is not part of the owned range');
  }
  const orgId = 'org_01M8EV44EE22VXE4B7E6B1SDC7';
  const byName = K.orgRepoByName(orgId, 'name', REPOS[0]!);
  const byCreated = K.orgRepoByCreated(orgId, '2026-11-29T00:00:00.000Z', REPOS[0]!);
  for (const key of [K.orgRepo(orgId, REPOS[0]!), K.orgRepoCount(orgId), byName, byCreated, K.repoName(orgId, 'Name'), K.repoSaga(orgId, 'saga_1'), K.releasedName(orgId, 'Name', REPOS[0]!), K.quotaGrant(orgId, 3)]) {
    storage.meta.putSync(key, true);
    t.ok(holds(storage.meta, Ranges.shard(orgShard(orgId)), key), `${JSON.stringify(key)} in the org's shard`);
  }
  t.notOk(holds(storage.meta, Ranges.orgRepos(orgId), K.orgRepoCount(orgId)), 'the count of the org\'s repositories is not in the list it counts');
  for (const key of [byName, byCreated]) t.notOk(holds(storage.meta, Ranges.orgRepos(orgId), key), `${JSON.stringify(key)} is not in the list it orders`);
  t.ok(holds(storage.meta, Ranges.orgReposByName(orgId), byName) && holds(storage.meta, Ranges.orgReposByCreated(orgId), byCreated), 'each order holds its keys');
  t.notOk(holds(storage.meta, Ranges.orgReposByName(orgId), byCreated), 'and not the other\'s');
  const global = [K.keyVersion(), K.layoutVersion(), K.org(orgId), K.orgSlug('acme'), K.key('key_1'), K.orgKey(orgId, 'key_1'), K.webhookTarget(orgId, 'wht_1'), K.legacyOrgBytes(orgId), K.legacyIdempotency('key_1', 'k')];
  for (const key of global) {
    storage.meta.putSync(key, true);
    t.ok(holds(storage.meta, Ranges.global(), key), `${JSON.stringify(key)} is global`);
    t.notOk(holds(storage.meta, Ranges.allShards(), key), `${JSON.stringify(key)} is in no shard`);
  }
  let total = 0;
  for (let s = 0; s < SHARD_COUNT; s++) total += storage.meta.getKeysCount(Ranges.shard(s));
  t.equal(total, storage.meta.getKeysCount(Ranges.allShards()), 'the shard ranges partition the shard-owned keys');
});

t.test('a key built from the encoded object prefix finds the stored object', async (t) => {
  const STORED = 'cd'.repeat(20);
  for (const repoId of REPOS) {
    const value = encodeInlineObject('blob', Buffer.from(`content of ${repoId}`));
    storage.objects.putSync(K.object(repoId, STORED), value);
    const raw = Buffer.concat([K.objectKeyPrefix(repoId), Buffer.from(STORED, 'latin1')]);
    t.same(storage.objects.get(raw), value, `${repoId}: the raw key reads the object`);
    const reader = new ObjectReader(storage, repoId);
    try {
      t.ok(reader.has(STORED), `${repoId}: the object reader finds it`);
      t.equal(reader.typeAndSize(STORED)?.size, `content of ${repoId}`.length);
      t.notOk(reader.has('ef'.repeat(20)), 'and not an object it does not have');
    } finally {
      reader.release();
    }
  }
});

t.test("a repository's and an org's shard are their actors' shards", async (t) => {
  for (const id of [...REPOS, '', 'org_01M8EV46RZ7TABSPW1YB7YA64B', 'é€😀']) {
    t.equal(repoShard(id), shardOf(repoActor(id)), `repo ${id}`);
    t.equal(orgShard(id), shardOf(orgActor(id)), `org ${id}`);
  }
  // Shard numbers are stored in every key: the hash must never change. Values from the first layout.
  t.equal(shardOf('repo:repo_x'), 26, 'a repository actor keeps its shard');
  t.equal(repoShard('repo_01M8EV46RZ7TABSPW1YB7YA64B'), 4, 'a repository keeps its shard');
  t.equal(orgShard('org_01M8EV46RZ7TABSPW1YB7YA64B'), 12, 'an org keeps its shard');
  // Actors spread over the shards, not onto a few.
  const spread = new Set(Array.from({ length: 4096 }, (_, i) => repoShard(`repo_${i.toString(36)}`)));
  t.ok(spread.size > SHARD_COUNT * 0.9, `4,096 repositories use ${spread.size} of ${SHARD_COUNT} shards`);
});
