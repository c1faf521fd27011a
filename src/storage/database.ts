import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { migrateLayout, type MigrationOptions } from './layout-migration.js';
import type { WriteRecorder } from './write-recorder.js';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath, type Key, type TransactionFlags } from 'lmdb';

/**
 * The LMDB environment of a data directory. One environment, shared by the front end, every actor
 * worker and the CLI (LMDB is multi-process safe), with three databases:
 *
 * - `meta`: every record, under ordered-tuple keys (see `keys.ts`) so range scans serve lists,
 *   cursors and per-repository cleanup;
 * - `objects`: git objects by `[shard, repoId, oid]`, committed in the same transaction as the
 *   metadata that references them;
 * - `chunks`: the 1 MiB pieces of large blobs by `[shard, repoId, uploadId, index]`, streamed in
 *   before the mutation that references them commits.
 *
 * Opening brings a directory of an older key layout to the current one (layout-migration.ts).
 */
/**
 * Flags for `transactionSync` (lmdb-js's `TransactionFlags` enum is a type only): NO_SYNC_FLUSH |
 * SYNCHRONOUS_COMMIT, the flags its own `putSync` uses. In an environment opened with overlapping
 * sync (as `openStorage` requires), such a commit releases LMDB's write lock and then flushes to
 * disk before `transactionSync` returns (`mdb_txn_commit`): durable on return, and other writers
 * are not kept waiting for this one's sync.
 */
export const COMMIT_THEN_SYNC = (0x10000 | 2) as TransactionFlags;

/**
 * COMMIT_THEN_SYNC for a transaction that may also be opened inside another, where it is a child
 * transaction (rolled back alone if its callback throws), as with lmdb-js's default flags. An
 * environment with overlapping sync has no commit that skips the sync: without NO_SYNC_FLUSH (the
 * default flags among them) a commit syncs before writing its meta page, with the write lock held
 * (two threads committing 20 puts each in a loop: 1,787–1,831 commits a second that way, 2,006–2,235
 * with these flags).
 */
export const NESTABLE_COMMIT_THEN_SYNC = (0x10000 | 2 | 1) as TransactionFlags;

export interface Storage {
  root: RootDatabase;
  meta: Database<unknown, Key>;
  objects: Database<Buffer, Key>;
  chunks: Database<Buffer, Key>;
  close(): Promise<void>;
  /** Set when every write through this storage is recorded (`recordingStorage`, write-recorder.ts). */
  recorder?: WriteRecorder;
}

/** `migration` tunes the layout migration, if one is due (tests interrupt it). */
export function openStorage(dataDir: string, migration: MigrationOptions = {}): Storage {
  const path = join(dataDir, 'db');
  mkdirSync(path, { recursive: true });
  const options: RootDatabaseOptionsWithPath & { trackMetrics: boolean } = {
    path,
    maxDbs: 8,
    // Plain msgpack maps: no shared record structures, so the CLI and the server (different
    // processes) never depend on each other's structure tables.
    encoder: { useRecords: false },
    mapSize: 64 * 1024 ** 3,
    // lmdb-js's default on Linux, stated because COMMIT_THEN_SYNC relies on it for durability:
    // opening fails rather than silently committing without a sync.
    overlappingSync: true,
    // LMDB's own write-lock, page and sync totals (a clock read per transaction), for /metrics.
    trackMetrics: true,
  };
  const root = open(options);
  const meta = root.openDB<unknown, Key>({ name: 'meta', encoder: { useRecords: false } } as unknown as { name: string });
  const objects = root.openDB<Buffer, Key>({ name: 'objects', encoding: 'binary' });
  const chunks = root.openDB<Buffer, Key>({ name: 'chunks', encoding: 'binary' });
  const storage: Storage = {
    root,
    meta,
    objects,
    chunks,
    close: () => root.close(),
  };
  // Here, so that the server and every CLI command pass through it before reading anything.
  migrateLayout(storage, migration);
  return storage;
}
