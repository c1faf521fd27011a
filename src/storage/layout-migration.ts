import type { Database, Key } from 'lmdb';
import type { Storage } from './database.js';
import { NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import { K, keyInRange, LAYOUT_VERSION, Layout1, Layout2, Layout3, lastPart, Ranges, shardOfLane, type KeyRange } from './keys.js';
import { repoCreatedAt, type ListedRepo } from './repo-saga-store.js';
import { orgsWithData } from './repo-store.js';
import { orgShard, type DeliveryOwner } from './shards.js';

/**
 * Brings a data directory written by an older build to the current key layout (keys.ts), once,
 * when storage opens: before the server or any CLI command reads it.
 *
 * Entries move in bounded transactions (at most `BATCH_ENTRIES` entries or `BATCH_BYTES` of
 * values each, by default), so a large directory never holds LMDB's write lock for long and never needs one
 * huge transaction. Each transaction writes its entries under their new keys and removes the old
 * ones: every entry is in exactly one place at any moment. The layout version is written in the
 * last transaction, after nothing of the old layout is left; until then every open resumes the
 * move where it stopped (a `kill -9` included), and nothing reads the directory before that.
 * Two processes opening at once interleave batches safely: each batch reads what is left inside
 * its own write transaction.
 */
const BATCH_ENTRIES = 2_000;
const BATCH_BYTES = 32 * 1024 * 1024;

export interface MigrationOptions {
  /** Entries per transaction (default 2,000). */
  batchEntries?: number;
  /** Called after each committed transaction with the entries moved so far. */
  onBatch?: (moved: number) => void;
}

interface Move {
  db: Database<unknown, Key>;
  from: Key;
  to: Key;
  value: unknown;
}

export interface MigrationResult {
  /** The layout the directory had (undefined: a new directory, or one written before versions). */
  from: number | undefined;
  moved: number;
}

export function migrateLayout(storage: Storage, options: MigrationOptions = {}): MigrationResult {
  const limit = Math.max(1, options.batchEntries ?? BATCH_ENTRIES);
  const { meta } = storage;
  const from = meta.get(K.layoutVersion()) as number | undefined;
  if (from === LAYOUT_VERSION) return { from, moved: 0 };
  if (from !== undefined && from > LAYOUT_VERSION) {
    throw new Error(`the data directory has storage layout ${from}, newer than this build's ${LAYOUT_VERSION}: run a newer repohost`);
  }
  let moved = 0;
  const orderLists = from === undefined || from < 6 ? listOrders(meta) : () => 0;
  for (;;) {
    const done = storage.root.transactionSync(() => {
      const batch = nextBatch(storage, limit);
      for (const { db, from: old, to, value } of batch) {
        db.putSync(to, value);
        db.removeSync(old);
      }
      const ordered = batch.length === 0 ? orderLists(limit) : 0;
      if (batch.length + ordered === 0) {
        if (from === undefined || from < 5) writeOrgRepoCounts(meta);
        meta.putSync(K.layoutVersion(), LAYOUT_VERSION);
      }
      moved += batch.length + ordered;
      return batch.length + ordered === 0;
    }, NESTABLE_COMMIT_THEN_SYNC);
    if (done) return { from, moved };
    options.onBatch?.(moved);
  }
}

/**
 * Layout 5: each org keeps the count of its repositories beside their list. Counted once, in the
 * transaction that records the layout, so an older build, which would change the list without
 * the count, refuses the directory from then on.
 */
function writeOrgRepoCounts(meta: Database<unknown, Key>): void {
  for (const orgId of [...orgsWithData(meta)]) {
    const count = meta.getKeysCount(Ranges.orgRepos(orgId));
    if (count > 0) meta.putSync(K.orgRepoCount(orgId), count);
    else meta.removeSync(K.orgRepoCount(orgId));
  }
}

/**
 * Layout 6: each entry of an org's list holds the repository's lowercased name and creation time,
 * and the org orders its list by both (repo-saga-store.ts). Only the org's shard is read — the name
 * from its name index, the time from the repository's id (a repository made by an older build
 * shows a later `created_at`: when its step ran) — so every node of a cluster, holding the org's
 * shard but not necessarily the repositories', writes the same keys. Returns a step that indexes
 * up to `limit` entries inside the caller's transaction and says how many: it goes on after the
 * last entry this process indexed (one that stopped part way starts over and passes the indexed
 * ones, recognized by their value).
 */
function listOrders(meta: Database<unknown, Key>): (limit: number) => number {
  let orgs: string[] | null = null;
  let org = 0;
  let names: Map<string, string> | null = null;
  let after: string | null = null;
  return (limit) => {
    orgs ??= [...orgsWithData(meta)];
    let indexed = 0;
    for (; org < orgs.length; org++, after = null, names = null) {
      const orgId = orgs[org]!;
      names ??= namesById(meta, orgId);
      const range = Ranges.orgRepos(orgId);
      const todo: string[] = [];
      for (const { key, value } of meta.getRange({ start: after === null ? range.start : keyInRange(range, after), end: range.end })) {
        const repoId = lastPart(key);
        if (repoId === after || value !== true) continue;
        if (indexed + todo.length === limit) break;
        todo.push(repoId);
      }
      for (const repoId of todo) {
        const listed: ListedRepo = { name: names.get(repoId) ?? '', created_at: repoCreatedAt(repoId) };
        meta.putSync(K.orgRepo(orgId, repoId), listed);
        meta.putSync(K.orgRepoByName(orgId, listed.name, repoId), true);
        meta.putSync(K.orgRepoByCreated(orgId, listed.created_at, repoId), true);
        after = repoId;
        indexed++;
      }
      if (indexed === limit) return indexed;
    }
    return indexed;
  };
}

/** The org's repositories' lowercased names, from its name index (a claim is not a repository's). */
function namesById(meta: Database<unknown, Key>, orgId: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const { key, value } of meta.getRange(Ranges.orgNames(orgId))) if (typeof value === 'string') names.set(value, lastPart(key));
  return names;
}

/** The next entries of the old layout, read inside the caller's write transaction. */
function nextBatch(storage: Storage, limit: number): Move[] {
  const batch: Move[] = [];
  let bytes = 0;
  const full = (): boolean => batch.length >= limit || bytes >= BATCH_BYTES;
  const take = (db: Database<unknown, Key>, range: KeyRange, to: (key: Key, value: unknown) => Key): void => {
    for (const { key, value } of db.getRange({ ...range, limit: limit - batch.length })) {
      // A copy: a binary value read from LMDB may be a view of memory the next read reuses.
      const kept = Buffer.isBuffer(value) ? Buffer.from(value) : value;
      batch.push({ db, from: key, to: to(key, kept), value: kept });
      bytes += Buffer.isBuffer(kept) ? kept.length : 64;
      if (full()) return;
    }
  };
  const { meta } = storage;
  const orgIds = [...meta.getKeys(Ranges.orgs())].map(lastPart);
  for (const range of Layout1.metaRanges(orgIds)) {
    if (full()) return batch;
    take(meta, range, Layout1.metaKey);
  }
  // The pending index before the delivery records: a pending entry goes where its record goes,
  // found at its old key or, moved by an earlier batch, at its new one.
  const recordOf = (orgId: string, targetId: string, lane: string, deliveryId: string): DeliveryOwner | null => {
    const old = meta.get(Layout2.delivery(orgId, targetId, deliveryId)) as DeliveryOwner | undefined;
    if (old) return old;
    for (const shard of new Set([shardOfLane(orgId, lane), orgShard(orgId)])) {
      const moved = meta.get(K.webhookDelivery(shard, targetId, deliveryId)) as DeliveryOwner | undefined;
      if (moved) return moved;
    }
    return null;
  };
  for (const range of Layout2.metaRanges(orgIds)) {
    if (full()) return batch;
    take(meta, range, (key, value) => Layout2.metaKey(key, value, recordOf));
  }
  for (const range of Layout3.metaRanges(orgIds)) {
    if (full()) return batch;
    take(meta, range, Layout3.metaKey);
  }
  for (const db of [storage.objects, storage.chunks] as Database<unknown, Key>[]) {
    if (full()) return batch;
    take(db, Layout1.binaryRange(), Layout1.binaryKey);
  }
  return batch;
}
