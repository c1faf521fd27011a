import type { Key } from 'lmdb';
import { orgShard } from './shards.js';

/**
 * The key layout of the `meta` database: ordered tuples, so that everything one list or one
 * cleanup needs is one contiguous range.
 *
 *   ['cfg', 'key-version']            number   the org directory's version: bumped on every change to
 *                                     an org, key or webhook target (lmdb-org-directory.ts)
 *   ['org', orgId]                    OrgRecord
 *   ['org-slug', slug]                orgId
 *   ['key', keyId]                    SigningKeyRecord
 *   ['o', orgId, 'key', keyId]        true     keys of an org
 *   ['o', orgId, 'repo', repoId]      true     repositories of an org, in creation order (ULIDs)
 *   ['o', orgId, 'name', lowerName]   repoId   case-insensitive name index; a NameClaim instead
 *                                     while a saga holds the name (repo-saga-store.ts)
 *   ['o', orgId, 'saga', sagaId]      RepoSagaRecord  an unfinished create, rename or delete, in
 *                                     start order (the sweeper settles the stale ones)
 *   ['r', repoId]                     RepoRecord
 *   ['r', repoId, <kind>, …]          everything owned by the repository (bookmarks, changes,
 *                                     operations, …) — deleting a repository is one range delete
 *   ['r', repoId, 'chg', changeId]    ChangeRecord: the change's current commit and parents
 *   ['r', repoId, 'commit', oid]      changeId  every commit ever written for the repository (kept)
 *   ['r', repoId, 'evo', changeId, ulid]  EvolutionRecord, one per commit a change has had
 *   ['r', repoId, 'kid', parentId, childId]  true  children index (descendant walks for rebases)
 *   ['r', repoId, 'saga']             SagaFence  the newest saga decided here (its step ran, or the
 *                                     sweeper settled it without): an older or settled step is refused
 *   ['r', repoId, 'fmeta', path]      {k: v}   file metadata (set_metadata), outside git history
 *   ['r', repoId, 'analytics']        AnalyticsDocument (API §10), written by the analytics actor only
 *   ['r', repoId, 'analytics-state']  AnalyticsState: the head and inputs the document was computed at
 *   ['r', repoId, 'analytics-commit', oid]  one commit's analytics result, kept for the commits the
 *                                     document counts (incremental walks stop at them; rebuilds reuse them)
 *   ['r', repoId, 'sync', syncId]     SyncRecord (upstream syncs, newest last)
 *   ['r', repoId, 'tag', name]        TagRecord: a tag pulled from the upstream
 *   ['r', repoId, 'notes', name]      commit oid of `refs/notes/<name>` (pulled agentblame notes)
 *   ['o', orgId, 'sync', syncId]      repoId   the org's syncs in creation order (sync-runs)
 *   ['syncq', syncId]                 repoId   unfinished syncs in enqueue order (the sync queue)
 *   ['sync-repo', repoId, syncId]     orgId    a repository's sync entries outside its own range,
 *                                     so that deleting the repository can remove them
 *   ['o', orgId, 'wht', targetId]     WebhookTargetRecord (actors/system/webhooks/records.ts)
 *   ['o', orgId, 'whd', targetId, deliveryId]  DeliveryRecord: the target's delivery log (7 days)
 *   ['whq', targetId, lane, deliveryId]  orgId  pending deliveries per target and lane (the event's
 *                                     repository id, '-' for org events) in creation order: the
 *                                     webhook actor's durable queue
 *   ['r', repoId, 'bytes']            number   bytes of the repository's objects counted by the quota
 *   [shard, 'quota-allow', orgId]     ShardAllowance  the org's quota on one shard: bytes granted,
 *                                     returned and used by its repositories there (quota.ts)
 *   [orgShard, 'quota-grant', orgId, shard]  GrantLedgerEntry  what the org granted that shard
 *                                     and knows it returned (quota-ledger.ts)
 *   ['pend', repoId, oid]             PendingObject  a stored object nothing references yet: an
 *                                     uploaded blob, or a fetched object before its pull applies
 *                                     (pending-objects.ts; collected after the retention)
 *   ['staged', uploadId]              repoId   chunks a request is staging, until the blob commits
 *                                     or the request discards them (orphans are collected)
 *   ['outbox', eventId]               EventEnvelope, written with the mutation that caused it
 *   [shard, 'idem', keyId, idempotencyKey]  outcome, on the shard of the actor that ran the request
 *                                     (idempotency-store.ts)
 *   ['idem', keyId, idempotencyKey]   outcome written before records moved into shards, read only
 *   [orgShard, 'o', orgId, 'was', lowerName, repoId]  ms  a name the repository gave up (renamed
 *                                     or deleted), kept for idempotent repeats (released-names.ts)
 */
export const K = {
  keyVersion: (): Key => ['cfg', 'key-version'],
  org: (orgId: string): Key => ['org', orgId],
  orgSlug: (slug: string): Key => ['org-slug', slug],
  key: (keyId: string): Key => ['key', keyId],
  orgKey: (orgId: string, keyId: string): Key => ['o', orgId, 'key', keyId],
  orgRepo: (orgId: string, repoId: string): Key => ['o', orgId, 'repo', repoId],
  repoName: (orgId: string, name: string): Key => ['o', orgId, 'name', name.toLowerCase()],
  repoSaga: (orgId: string, sagaId: string): Key => ['o', orgId, 'saga', sagaId],
  repo: (repoId: string): Key => ['r', repoId],
  repoSagaFence: (repoId: string): Key => ['r', repoId, 'saga'],
  bookmark: (repoId: string, name: string): Key => ['r', repoId, 'bm', name],
  operation: (repoId: string, opId: string): Key => ['r', repoId, 'op', opId],
  change: (repoId: string, changeId: string): Key => ['r', repoId, 'chg', changeId],
  commit: (repoId: string, oid: string): Key => ['r', repoId, 'commit', oid],
  evolution: (repoId: string, changeId: string, id: string): Key => ['r', repoId, 'evo', changeId, id],
  child: (repoId: string, parentId: string, childId: string): Key => ['r', repoId, 'kid', parentId, childId],
  fileMeta: (repoId: string, path: string): Key => ['r', repoId, 'fmeta', path],
  /** `objects` database: a git object of the repository (see git-object-store.ts). */
  object: (repoId: string, oid: string): Key => [repoId, oid],
  /**
   * The same key encoded (ordered-binary: the id's bytes, a 0 separator, the oid's 40 ASCII
   * digits), room left for the oid: a reader that looks up thousands of objects writes each oid
   * into it instead of having an array of strings encoded each time.
   */
  objectKeyPrefix: (repoId: string): Buffer => Buffer.concat([Buffer.from(repoId, 'latin1'), Buffer.from([0])]),
  /** `chunks` database: piece `index` of a large blob staged under `uploadId` (see blob-store.ts). */
  chunk: (repoId: string, uploadId: string, index: number): Key => [repoId, uploadId, index],
  /** The newest sync record of the repository (denormalized for the repository view). */
  latestSync: (repoId: string): Key => ['r', repoId, 'sync-latest'],
  analytics: (repoId: string): Key => ['r', repoId, 'analytics'],
  analyticsState: (repoId: string): Key => ['r', repoId, 'analytics-state'],
  analyticsCommit: (repoId: string, oid: string): Key => ['r', repoId, 'analytics-commit', oid],
  sync: (repoId: string, syncId: string): Key => ['r', repoId, 'sync', syncId],
  tag: (repoId: string, name: string): Key => ['r', repoId, 'tag', name],
  notes: (repoId: string, name: string): Key => ['r', repoId, 'notes', name],
  orgSync: (orgId: string, syncId: string): Key => ['o', orgId, 'sync', syncId],
  syncQueue: (syncId: string): Key => ['syncq', syncId],
  repoSyncIndex: (repoId: string, syncId: string): Key => ['sync-repo', repoId, syncId],
  webhookTarget: (orgId: string, targetId: string): Key => ['o', orgId, 'wht', targetId],
  webhookDelivery: (orgId: string, targetId: string, deliveryId: string): Key => ['o', orgId, 'whd', targetId, deliveryId],
  webhookPending: (targetId: string, lane: string, deliveryId: string): Key => ['whq', targetId, lane, deliveryId],
  repoBytes: (repoId: string): Key => ['r', repoId, 'bytes'],
  quotaAllowance: (shard: number, orgId: string): Key => [shard, 'quota-allow', orgId],
  quotaGrant: (orgId: string, shard: number): Key => [orgShard(orgId), 'quota-grant', orgId, shard],
  /** The org-wide counter of the single-shard layout, read once by the migration (quota-migration.ts). */
  legacyOrgBytes: (orgId: string): Key => ['quota', orgId],
  pending: (repoId: string, oid: string): Key => ['pend', repoId, oid],
  stagedUpload: (uploadId: string): Key => ['staged', uploadId],
  outbox: (eventId: string): Key => ['outbox', eventId],
  idempotency: (shard: number, keyId: string, key: string): Key => [shard, 'idem', keyId, key],
  /** Where records were kept before they moved into shards (idempotency-store.ts reads it as a fallback). */
  legacyIdempotency: (keyId: string, key: string): Key => ['idem', keyId, key],
  releasedName: (orgId: string, name: string, repoId: string): Key => [orgShard(orgId), 'o', orgId, 'was', name.toLowerCase(), repoId],
};

/** LMDB's largest key (its default `maxkeysize`): lmdb-js refuses to write a longer one. */
export const MAX_KEY_BYTES = 1978;

/** The bytes of a tuple key as lmdb-js's ordered-binary writes it: UTF-8 strings, a byte between parts. */
export function keyBytes(key: ReadonlyArray<string | number>): number {
  return key.reduce<number>((n, part) => n + (typeof part === 'string' ? Buffer.byteLength(part) : 9), key.length - 1);
}

/** Sorts after any string element, so `[...prefix]` to `[...prefix, HIGH]` spans a prefix. */
const HIGH = '\uffff\uffff';

/** The org's grant ledger: one entry per shard it granted quota to. */
export function quotaGrants(orgId: string): { start: Key; end: Key } {
  return { start: [orgShard(orgId), 'quota-grant', orgId, -1], end: [orgShard(orgId), 'quota-grant', orgId, Number.MAX_SAFE_INTEGER] };
}

/** The repositories that gave up `name` in the org (released-names.ts). */
export function releasedNames(orgId: string, name: string): { start: Key; end: Key } {
  return under([orgShard(orgId), 'o', orgId, 'was', name.toLowerCase()]);
}

/** The range of every key that starts with `prefix` (and not the prefix key itself). */
export function under(prefix: readonly (string | number)[]): { start: Key; end: Key } {
  return { start: [...prefix, null] as Key, end: [...prefix, HIGH] };
}

/** The org's unfinished repository sagas, oldest first (saga ids are ULIDs). */
export function orgSagaRange(orgId: string): { start: Key; end: Key } {
  return under(['o', orgId, 'saga']);
}
