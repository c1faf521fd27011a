import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { migrateLayout, type MigrationOptions } from './layout-migration.js';
import type { WriteRecorder } from './write-recorder.js';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath, type Key } from 'lmdb';

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

/**
 * `putSync` with `noOverwrite`: stores `value` unless `key` is there, in one call (lmdb-js looks the
 * key up and puts in native code), and answers whether it wrote (lmdb-js does, though its declared
 * type says it returns nothing).
 */
export function putIfAbsent<V>(db: Database<V, Key>, key: Key, value: V): boolean {
  return (db.putSync(key, value, { noOverwrite: true }) as unknown as boolean) === true;
}
