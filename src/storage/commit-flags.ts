import type { TransactionFlags } from 'lmdb';

/**
 * Flags for `transactionSync` (lmdb-js's `TransactionFlags` enum is a type only): NO_SYNC_FLUSH |
 * SYNCHRONOUS_COMMIT, the flags its own `putSync` uses. In an environment opened with overlapping
 * sync (as `openStorage` in database.ts requires), such a commit releases LMDB's write lock and
 * then flushes to disk before `transactionSync` returns (`mdb_txn_commit`): durable on return, and
 * other writers are not kept waiting for this one's sync. Every commit of the server outside a
 * batch's own child transactions uses one of these two.
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
