import * as lmdb from 'lmdb';
import type { Key } from 'lmdb';
import { SHARD_COUNT } from '../actors/shard-map.js';
import type { EventEnvelope } from './records.js';
import { deliveryShard, eventShard, laneShard, orgShard, repoShard, type DeliveryOwner } from './shards.js';

/**
 * The key layout. 256 shards (`actors/shard-map.ts`); everything a shard owns is one contiguous
 * range `[shard] .. [shard + 1]` in each database, so a shard is copied, streamed and dropped as a
 * unit. A repository's data belongs to its actor's shard (`repoShard`), an org's repository
 * index to the org actor's (`orgShard`). Shard numbers sort before every string, so the global
 * keys (first part a string) follow all the shards.
 *
 * `meta`, shard-owned (ordered tuples, so that everything one list or one cleanup needs is one
 * contiguous range):
 *   [s, 'r', repoId]                     RepoRecord
 *   [s, 'r', repoId, <kind>, …]          everything owned by the repository (bookmarks, changes,
 *                                        operations, …) — deleting a repository is one range delete
 *   [s, 'r', repoId, 'bm', name]         BookmarkRecord
 *   [s, 'r', repoId, 'op', opId]         OperationRecord
 *   [s, 'r', repoId, 'chg', changeId]    ChangeRecord: the change's current commit and parents
 *   [s, 'r', repoId, 'commit', oid]      changeId  every commit ever written for the repository (kept)
 *   [s, 'r', repoId, 'evo', changeId, ulid]  EvolutionRecord, one per commit a change has had
 *   [s, 'r', repoId, 'kid', parentId, childId]  true  children index (descendant walks for rebases)
 *   [s, 'r', repoId, 'fmeta', path]      {k: v}   file metadata (set_metadata), outside git history
 *   [s, 'r', repoId, 'analytics']        AnalyticsDocument (API §10), written by the analytics actor only
 *   [s, 'r', repoId, 'analytics-state']  AnalyticsState: the head and inputs the document was computed at
 *   [s, 'r', repoId, 'analytics-commit', oid]  one commit's analytics result, kept for the commits the
 *                                        document counts (incremental walks stop at them; rebuilds reuse them)
 *   [s, 'r', repoId, 'sync', syncId]     SyncRecord (upstream syncs, newest last)
 *   [s, 'r', repoId, 'sync-latest']      the newest SyncRecord (denormalized for the repository view)
 *   [s, 'r', repoId, 'tag', name]        TagRecord: a tag pulled from the upstream
 *   [s, 'r', repoId, 'notes', name]      commit oid of `refs/notes/<name>` (pulled agentblame notes)
 *   [s, 'r', repoId, 'bytes']            number   bytes of the repository's objects counted by the quota
 *   [s, 'sync-repo', repoId, syncId]     orgId    a repository's sync entries outside its own range,
 *                                        so that deleting the repository can remove them
 *   [s, 'org-sync', orgId, syncId]       repoId   the org's syncs of repositories on this shard, in
 *                                        creation order: the org's sync runs are every shard's, merged
 *   [s, 'pend', repoId, oid]             PendingObject  a stored object nothing references yet: an
 *                                        uploaded blob, or a fetched object before its pull applies
 *                                        (pending-objects.ts; collected after the retention)
 *   [s, 'staged', repoId, uploadId]      repoId   chunks a request is staging, until the blob commits
 *                                        or the request discards them (orphans are collected)
 *   [s, 'syncq', repoId, syncId]         repoId   the repository's unfinished syncs in enqueue order (the
 *                                        sync scheduler reads every shard's: sync-store.ts)
 *   [s, 'r', repoId, 'saga']             SagaFence  the newest saga decided here (its step ran, or the
 *                                        sweeper settled it without): an older or settled step is refused
 *   [s, 'quota-allow', orgId]            ShardAllowance  the org's quota on one shard: bytes granted,
 *                                        returned and used by its repositories there (quota.ts)
 *   [s, 'idem', keyId, idempotencyKey]   outcome, on the shard of the actor that ran the request
 *                                        (idempotency-store.ts)
 *   [s, 'log']                           ReplicaPosition  cluster mode: the last log sequence the
 *                                        shard's data reflects, and its commit count there
 *                                        (replica-position.ts)
 *   [s, 'commits']                       number   cluster mode: transactions that wrote the shard,
 *                                        here or on the owners it was copied from (replica-position.ts)
 *   [s, 'importing']                     true     cluster mode: the shard is being cleared or copied from a
 *                                        peer; its data is not whole until the key goes (replica-position.ts)
 *   [o, 'o', orgId, 'repo', repoId]      ListedRepo  repositories of an org, in creation order (ULIDs),
 *                                        with the parts of their `by-name` and `by-created` keys
 *   [o, 'o', orgId, 'by-name', lowerName, repoId]  true  the same repositories by name, then by
 *   [o, 'o', orgId, 'by-created', createdAt, repoId]  true  creation time: `repos/list`'s orders,
 *                                        paged by position (repo-saga-store.ts; layout 6 wrote the first)
 *   [o, 'o', orgId, 'repo-count']        number   how many `repo` entries the org has, changed with
 *                                        them (repo-saga-store.ts; layout 5 wrote the first ones)
 *   [o, 'o', orgId, 'name', lowerName]   repoId   case-insensitive name index; a NameClaim instead
 *                                        while a saga holds the name (repo-saga-store.ts)
 *   [o, 'o', orgId, 'saga', sagaId]      RepoSagaRecord  an unfinished create, rename or delete, in
 *                                        start order (the sweeper settles the stale ones)
 *   [o, 'o', orgId, 'was', lowerName, repoId]  ms  a name the repository gave up (renamed or
 *                                        deleted), kept for idempotent repeats (released-names.ts)
 *   [o, 'quota-grant', orgId, shard]     GrantLedgerEntry  what the org granted that shard and knows
 *                                        it returned (quota-ledger.ts)
 *   [p, 'outbox', eventId]               EventEnvelope, written with the mutation that caused it
 *                                        (outbox.ts)
 *   [p, 'whd', targetId, deliveryId]     DeliveryRecord: the target's delivery log (7 days), merged
 *                                        across shards when listed (webhook-store.ts)
 *   [p, 'whq', targetId, lane, deliveryId]  orgId  pending deliveries per target and lane (the event's
 *                                        repository id, '-' for org events) in creation order: the
 *                                        webhook actor's durable queue, drained by the shard's owner
 *   (s = the repository's shard, o = the org's, p = the shard of the actor that wrote the entry:
 *   an event's producer, `laneShard` — its repository's actor, the org's for an org event — for
 *   the event and the deliveries fanned out of it; the org's for a redelivery)
 *
 * `objects`: [s, repoId, oid] → a git object (git-object-store.ts). `chunks`: [s, repoId,
 * uploadId, index] → a 1 MiB piece of a large blob (blob-store.ts).
 *
 * `meta`, global (org-level data every node needs):
 *   ['cfg', 'key-version']               number   the org directory's version: bumped on every change to
 *                                        an org, key or webhook target (lmdb-org-directory.ts)
 *   ['cfg', 'layout']                    number   the layout version of the data directory (layout-migration.ts)
 *   ['org', orgId]                       OrgRecord
 *   ['org-slug', slug]                   orgId
 *   ['key', keyId]                       SigningKeyRecord
 *   ['o', orgId, 'key', keyId]           true     keys of an org
 *   ['o', orgId, 'wht', targetId]        WebhookTargetRecord (actors/system/webhooks/records.ts)
 *
 * `meta`, from before shards, read once or as a fallback:
 *   ['idem', keyId, idempotencyKey]      outcome, read by repeats until it expires (idempotency-store.ts)
 *   ['quota', orgId]                     number   the org-wide counter, read by the migration to
 *                                        allowances (quota-migration.ts)
 */
type Part = string | number;

/** lmdb-js's own key encoder (exported at run time, missing from its type declarations). */
export const encodeKey = (lmdb as unknown as { keyValueToBuffer: (key: Key) => Uint8Array }).keyValueToBuffer;

const inRepo = (repoId: string, ...rest: Part[]): Part[] => [repoShard(repoId), 'r', repoId, ...rest];
const inOrg = (orgId: string, ...rest: Part[]): Part[] => [orgShard(orgId), 'o', orgId, ...rest];

export const K = {
  keyVersion: (): Key => ['cfg', 'key-version'],
  layoutVersion: (): Key => ['cfg', 'layout'],
  org: (orgId: string): Key => ['org', orgId],
  orgSlug: (slug: string): Key => ['org-slug', slug],
  key: (keyId: string): Key => ['key', keyId],
  orgKey: (orgId: string, keyId: string): Key => ['o', orgId, 'key', keyId],
  orgRepo: (orgId: string, repoId: string): Key => inOrg(orgId, 'repo', repoId),
  /** How many `orgRepo` entries there are; absent (none) for an org without any since layout 5. */
  orgRepoCount: (orgId: string): Key => inOrg(orgId, 'repo-count'),
  orgRepoByName: (orgId: string, lowerName: string, repoId: string): Key => inOrg(orgId, 'by-name', lowerName, repoId),
  orgRepoByCreated: (orgId: string, createdAt: string, repoId: string): Key => inOrg(orgId, 'by-created', createdAt, repoId),
  // Read on nearly every request (read/record-cache.ts): spelled out, without the helpers' rest arrays.
  repoName: (orgId: string, name: string): Key => [orgShard(orgId), 'o', orgId, 'name', name.toLowerCase()],
  repoSaga: (orgId: string, sagaId: string): Key => inOrg(orgId, 'saga', sagaId),
  repo: (repoId: string): Key => [repoShard(repoId), 'r', repoId],
  repoSagaFence: (repoId: string): Key => inRepo(repoId, 'saga'),
  bookmark: (repoId: string, name: string): Key => [repoShard(repoId), 'r', repoId, 'bm', name],
  operation: (repoId: string, opId: string): Key => inRepo(repoId, 'op', opId),
  change: (repoId: string, changeId: string): Key => inRepo(repoId, 'chg', changeId),
  commit: (repoId: string, oid: string): Key => inRepo(repoId, 'commit', oid),
  evolution: (repoId: string, changeId: string, id: string): Key => inRepo(repoId, 'evo', changeId, id),
  child: (repoId: string, parentId: string, childId: string): Key => inRepo(repoId, 'kid', parentId, childId),
  fileMeta: (repoId: string, path: string): Key => inRepo(repoId, 'fmeta', path),
  /** `objects` database: a git object of the repository (see git-object-store.ts). */
  object: (repoId: string, oid: string): Key => [repoShard(repoId), repoId, oid],
  /**
   * The same key encoded as lmdb-js writes it (ordered-binary: the shard number, the id, a 0
   * separator after each), room left for the oid's 40 ASCII digits: a reader that looks up
   * thousands of objects writes each oid into it instead of having a tuple encoded each time.
   */
  objectKeyPrefix: (repoId: string): Buffer => Buffer.concat([encodeKey([repoShard(repoId), repoId]), Buffer.from([0])]),
  /** `chunks` database: piece `index` of a large blob staged under `uploadId` (see blob-store.ts). */
  chunk: (repoId: string, uploadId: string, index: number): Key => [repoShard(repoId), repoId, uploadId, index],
  /** The newest sync record of the repository (denormalized for the repository view). */
  latestSync: (repoId: string): Key => inRepo(repoId, 'sync-latest'),
  analytics: (repoId: string): Key => inRepo(repoId, 'analytics'),
  analyticsState: (repoId: string): Key => inRepo(repoId, 'analytics-state'),
  analyticsCommit: (repoId: string, oid: string): Key => inRepo(repoId, 'analytics-commit', oid),
  sync: (repoId: string, syncId: string): Key => inRepo(repoId, 'sync', syncId),
  tag: (repoId: string, name: string): Key => inRepo(repoId, 'tag', name),
  notes: (repoId: string, name: string): Key => inRepo(repoId, 'notes', name),
  /** The org's entry of a sync, on the shard of its repository (which alone writes it). */
  orgSync: (orgId: string, repoId: string, syncId: string): Key => [repoShard(repoId), 'org-sync', orgId, syncId],
  syncQueue: (repoId: string, syncId: string): Key => [repoShard(repoId), 'syncq', repoId, syncId],
  repoSyncIndex: (repoId: string, syncId: string): Key => [repoShard(repoId), 'sync-repo', repoId, syncId],
  webhookTarget: (orgId: string, targetId: string): Key => ['o', orgId, 'wht', targetId],
  webhookDelivery: (shard: number, targetId: string, deliveryId: string): Key => [shard, 'whd', targetId, deliveryId],
  webhookPending: (shard: number, targetId: string, lane: string, deliveryId: string): Key => [shard, 'whq', targetId, lane, deliveryId],
  repoBytes: (repoId: string): Key => inRepo(repoId, 'bytes'),
  quotaAllowance: (shard: number, orgId: string): Key => [shard, 'quota-allow', orgId],
  appliedPosition: (shard: number): Key => [shard, 'log'],
  quotaGrant: (orgId: string, shard: number): Key => [orgShard(orgId), 'quota-grant', orgId, shard],
  /** The org-wide counter of the single-shard layout, read once by the migration (quota-migration.ts). */
  legacyOrgBytes: (orgId: string): Key => ['quota', orgId],
  pending: (repoId: string, oid: string): Key => [repoShard(repoId), 'pend', repoId, oid],
  /** An upload's staging announcement: under the repository's shard, so it names the repository. */
  stagedUpload: (repoId: string, uploadId: string): Key => [repoShard(repoId), 'staged', repoId, uploadId],
  outbox: (shard: number, eventId: string): Key => [shard, 'outbox', eventId],
  idempotency: (shard: number, keyId: string, key: string): Key => [shard, 'idem', keyId, key],
  commitCount: (shard: number): Key => [shard, 'commits'],
  shardImporting: (shard: number): Key => [shard, 'importing'],
  /** Where records were kept before they moved into shards (idempotency-store.ts reads it as a fallback). */
  legacyIdempotency: (keyId: string, key: string): Key => ['idem', keyId, key],
  releasedName: (orgId: string, name: string, repoId: string): Key => inOrg(orgId, 'was', name.toLowerCase(), repoId),
};

/** LMDB's largest key (its default `maxkeysize`): lmdb-js refuses to write a longer one. */
export const MAX_KEY_BYTES = 1978;

/** The bytes of a tuple key as lmdb-js's ordered-binary writes it: UTF-8 strings, a byte between parts. */
export function keyBytes(key: ReadonlyArray<string | number>): number {
  return key.reduce<number>((n, part) => n + (typeof part === 'string' ? Buffer.byteLength(part) : 9), key.length - 1);
}

/** Sorts after any string element, so `[...prefix]` to `[...prefix, HIGH]` spans a prefix. */
const HIGH = '\uffff\uffff';

export interface KeyRange {
  start: Key;
  end: Key;
}

/** The range of every key that starts with `prefix` (and not the prefix key itself). */
function under(prefix: readonly Part[]): KeyRange {
  return { start: [...prefix, null] as Key, end: [...prefix, HIGH] };
}

/** The key of `id` in a range of `under(prefix)`: the prefix, then the id. */
export function keyInRange(range: KeyRange, id: string): Key {
  return [...(range.end as Part[]).slice(0, -1), id];
}

/** The named key ranges: what lists, scans and cleanups walk (the only place a prefix is spelled). */
export const Ranges = {
  /** Everything a repository owns in `meta` besides its record (see `clearRepository`). */
  repoOwned: (repoId: string): KeyRange => under(inRepo(repoId)),
  bookmarks: (repoId: string): KeyRange => under(inRepo(repoId, 'bm')),
  operations: (repoId: string): KeyRange => under(inRepo(repoId, 'op')),
  changes: (repoId: string): KeyRange => under(inRepo(repoId, 'chg')),
  commits: (repoId: string): KeyRange => under(inRepo(repoId, 'commit')),
  evolutions: (repoId: string, changeId: string): KeyRange => under(inRepo(repoId, 'evo', changeId)),
  children: (repoId: string, parentId: string): KeyRange => under(inRepo(repoId, 'kid', parentId)),
  analyticsCommits: (repoId: string): KeyRange => under(inRepo(repoId, 'analytics-commit')),
  syncs: (repoId: string): KeyRange => under(inRepo(repoId, 'sync')),
  tags: (repoId: string): KeyRange => under(inRepo(repoId, 'tag')),
  notes: (repoId: string): KeyRange => under(inRepo(repoId, 'notes')),
  repoSyncIndex: (repoId: string): KeyRange => under([repoShard(repoId), 'sync-repo', repoId]),
  pending: (repoId: string): KeyRange => under([repoShard(repoId), 'pend', repoId]),
  staged: (repoId: string): KeyRange => under([repoShard(repoId), 'staged', repoId]),
  /** Every pending object of a shard's repositories. */
  shardPending: (shard: number): KeyRange => under([shard, 'pend']),
  /** Every staged upload of a shard's repositories. */
  shardStaged: (shard: number): KeyRange => under([shard, 'staged']),
  orgRepos: (orgId: string): KeyRange => under(inOrg(orgId, 'repo')),
  orgReposByName: (orgId: string): KeyRange => under(inOrg(orgId, 'by-name')),
  orgReposByCreated: (orgId: string): KeyRange => under(inOrg(orgId, 'by-created')),
  /** Everything an org keeps on its shard. */
  orgData: (orgId: string): KeyRange => under(inOrg(orgId)),
  /** The shard-owned data of every org whose shard is `shard`. */
  shardOrgData: (shard: number): KeyRange => under([shard, 'o']),
  orgNames: (orgId: string): KeyRange => under(inOrg(orgId, 'name')),
  /** The org's syncs of repositories on one shard, oldest first (sync ids are ULIDs). */
  shardOrgSyncs: (shard: number, orgId: string): KeyRange => under([shard, 'org-sync', orgId]),
  /** The org's unfinished repository sagas, oldest first (saga ids are ULIDs). */
  orgSagas: (orgId: string): KeyRange => under(inOrg(orgId, 'saga')),
  /** The repositories that gave up `name` in the org (released-names.ts). */
  releasedNames: (orgId: string, name: string): KeyRange => under(inOrg(orgId, 'was', name.toLowerCase())),
  /** The org's grant ledger: one entry per shard it granted quota to. */
  quotaGrants: (orgId: string): KeyRange => ({ start: [orgShard(orgId), 'quota-grant', orgId, -1], end: [orgShard(orgId), 'quota-grant', orgId, Number.MAX_SAFE_INTEGER] }),
  /** `objects`: every object of a repository. */
  objects: (repoId: string): KeyRange => under([repoShard(repoId), repoId]),
  /** `chunks`: every chunk of a repository. */
  chunks: (repoId: string): KeyRange => under([repoShard(repoId), repoId]),
  /** `chunks`: the chunks of one upload. */
  uploadChunks: (repoId: string, uploadId: string): KeyRange => under([repoShard(repoId), repoId, uploadId]),
  /** Everything shard `shard` owns, in any of the three databases. */
  shard: (shard: number): KeyRange => ({ start: [shard], end: [shard + 1] }),
  /** Every shard-owned key, in any of the three databases (shard numbers sort before strings). */
  allShards: (): KeyRange => ({ start: [0], end: [SHARD_COUNT] }),
  /** `meta`'s global keys (first part a string: they sort after every shard). */
  global: (): KeyRange => ({ start: [''], end: [HIGH] }),
  orgs: (): KeyRange => under(['org']),
  signingKeys: (): KeyRange => under(['key']),
  orgKeys: (orgId: string): KeyRange => under(['o', orgId, 'key']),
  webhookTargets: (orgId: string): KeyRange => under(['o', orgId, 'wht']),
  /** A target's delivery records on one shard. */
  webhookDeliveries: (shard: number, targetId: string): KeyRange => under([shard, 'whd', targetId]),
  /** Every delivery record on a shard, target by target. */
  shardWebhookDeliveries: (shard: number): KeyRange => under([shard, 'whd']),
  /** Every pending delivery on a shard, target by target and lane by lane. */
  webhookPending: (shard: number): KeyRange => under([shard, 'whq']),
  webhookPendingOf: (shard: number, targetId: string): KeyRange => under([shard, 'whq', targetId]),
  webhookLane: (shard: number, targetId: string, lane: string): KeyRange => under([shard, 'whq', targetId, lane]),
  /** The unfinished syncs of a shard's repositories, repository by repository. */
  shardSyncQueue: (shard: number): KeyRange => under([shard, 'syncq']),
  /** A shard's outbox, oldest event first. */
  outbox: (shard: number): KeyRange => under([shard, 'outbox']),
};

/** The layout `K` and `Ranges` describe, recorded under `K.layoutVersion()` (layout-migration.ts). */
export const LAYOUT_VERSION = 6;

/**
 * Layout 1, from before shards: the same tuples without the shard number in front (and an
 * upload's staging entry `['staged', uploadId]` and a queued sync's `['syncq', syncId]`, each →
 * repoId). What the layout migration moves, and where each entry goes.
 */
export const Layout1 = {
  /** `meta` ranges whose keys became shard-owned, given every org id. */
  metaRanges: (orgIds: readonly string[]): KeyRange[] => [
    ...['r', 'pend', 'staged', 'sync-repo', 'syncq'].map((kind) => under([kind])),
    ...orgIds.flatMap((orgId) => ['repo', 'name', 'sync'].map((kind) => under(['o', orgId, kind]))),
  ],
  /** `objects` and `chunks`: every key started with the repository id. */
  binaryRange: (): KeyRange => Ranges.global(),
  /** Where a `meta` entry of layout 1 lives now. */
  metaKey: (key: Key, value: unknown): Key => {
    const parts = key as Part[];
    if (parts[0] === 'staged') return K.stagedUpload(value as string, parts[1] as string);
    if (parts[0] === 'syncq') return K.syncQueue(value as string, parts[1] as string);
    if (parts[0] === 'o' && parts[2] === 'sync') return K.orgSync(parts[1] as string, value as string, parts[3] as string);
    const owner = parts[1] as string;
    return [parts[0] === 'o' ? orgShard(owner) : repoShard(owner), ...parts];
  },
  /** Where an `objects` or `chunks` entry of layout 1 lives now. */
  binaryKey: (key: Key): Key => [repoShard((key as Part[])[0] as string), ...(key as Part[])],
};

/** The lane of a target's deliveries of org events (a repository's lane is its id). */
export const ORG_LANE = '-';

/** The shard of the actor that produces a lane's events. */
export const shardOfLane = (orgId: string, lane: string): number => laneShard(orgId, lane === ORG_LANE ? null : lane);

/**
 * Layout 2 (and 1): the webhook queues were global. `['outbox', eventId]` → EventEnvelope,
 * `['whq', targetId, lane, deliveryId]` → orgId, `['o', orgId, 'whd', targetId, deliveryId]` →
 * DeliveryRecord. Each moves to the shard of the actor that wrote it (see the layout above).
 */
export const Layout2 = {
  metaRanges: (orgIds: readonly string[]): KeyRange[] => [under(['outbox']), under(['whq']), ...orgIds.map((orgId) => under(['o', orgId, 'whd']))],
  delivery: (orgId: string, targetId: string, deliveryId: string): Key => ['o', orgId, 'whd', targetId, deliveryId],
  /**
   * Where an entry of layout 2 lives now. A pending entry's shard is its delivery's: `recordOf`
   * finds the record (null: none left, a stale entry, which goes to its lane's shard).
   */
  metaKey: (key: Key, value: unknown, recordOf: (orgId: string, targetId: string, lane: string, deliveryId: string) => DeliveryOwner | null): Key => {
    const parts = key as string[];
    if (parts[0] === 'outbox') return K.outbox(eventShard(value as EventEnvelope), parts[1]!);
    if (parts[0] === 'whq') {
      const [, targetId, lane, deliveryId] = parts as [string, string, string, string];
      const orgId = value as string;
      const record = recordOf(orgId, targetId, lane, deliveryId);
      return K.webhookPending(record ? deliveryShard(record) : shardOfLane(orgId, lane), targetId, lane, deliveryId);
    }
    return K.webhookDelivery(deliveryShard(value as DeliveryOwner), parts[3]!, parts[4]!);
  },
};

/**
 * Layouts 2 and 3: the org's sync runs were one list on the org's shard, `[o, 'o', orgId, 'sync',
 * syncId]` → repoId, written by the repositories' actors into a shard not theirs. Each entry
 * moves to its repository's shard (`K.orgSync`).
 */
export const Layout3 = {
  metaRanges: (orgIds: readonly string[]): KeyRange[] => orgIds.map((orgId) => under(inOrg(orgId, 'sync'))),
  metaKey: (key: Key, value: unknown): Key => {
    const parts = key as Part[];
    return K.orgSync(parts[2] as string, value as string, parts[4] as string);
  },
};

/** The last part of a tuple key: the id that a range's keys differ by. */
export function lastPart(key: Key): string {
  const parts = key as string[];
  return parts[parts.length - 1]!;
}

/** The repository of a `[s, 'pend' | 'staged' | 'syncq', repoId, id]` key. */
export function repoOfShardEntry(key: Key): string {
  return (key as Part[])[2] as string;
}

/** The shard owning `key` (its first part), or null for a global key (one that starts with a string). */
export function shardOfKey(key: Key): number | null {
  const first = Array.isArray(key) ? (key as unknown[])[0] : key;
  if (typeof first === 'number') return first;
  if (typeof first === 'string') return null;
  throw new Error('a stored key is a tuple starting with a shard number or a string');
}
