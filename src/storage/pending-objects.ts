import type { Database, Key, Transaction } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';

/**
 * Stored objects that nothing references yet, under `['pend', repoId, oid]`: blobs uploaded with
 * `POST …/blobs` (API §5.4), the objects a pull fetched until the pull applies, and the early
 * batches of a large git push until its refs land. The sweep
 * (blob-collect.ts) deletes those still pending after the retention.
 *
 * The invariant that makes collection safe: an object without a mark is never deleted, and every
 * object a repository's refs can reach is unmarked. Writers keep it by dropping the mark, in their
 * own transaction, whenever a write comes to reference a stored object (a write of the same bytes,
 * a `blob_oid`, a pull's import); only objects new to the repository are ever marked.
 */
type Meta = Database<unknown, Key>;

export interface PendingObject {
  /** When it was stored (ms since the epoch): the retention counts from here. */
  at: number;
  /** The pull (its sync id) or git push (its push id) whose pack stored or re-sent it; null for an upload. */
  sync: string | null;
}

export function getPending(meta: Meta, repoId: string, oid: string): PendingObject | undefined {
  return meta.get(K.pending(repoId, oid)) as PendingObject | undefined;
}

export function markPending(meta: Meta, repoId: string, oid: string, mark: PendingObject): void {
  meta.putSync(K.pending(repoId, oid), mark);
}

/** The object is referenced now: it is never collected. */
export function dropPending(meta: Meta, repoId: string, oid: string): void {
  meta.removeSync(K.pending(repoId, oid));
}

/** Every pending mark of a repository, in oid order. */
/** Drops every pending mark of the repository (it is being deleted). */
export function dropAllPending(meta: Meta, repoId: string): void {
  // Keys are collected before removing: a cursor is not walked while its range is being deleted.
  for (const key of [...meta.getKeys(Ranges.pending(repoId))]) meta.removeSync(key);
}

export function* pendingOf(meta: Meta, repoId: string): Generator<{ oid: string; mark: PendingObject }> {
  for (const { key, value } of meta.getRange(Ranges.pending(repoId))) yield { oid: lastPart(key), mark: value as PendingObject };
}

/** A pull applied or a push landed: what its pack stored is referenced by the refs it brought. */
export function dropPendingOwnedBy(meta: Meta, repoId: string, owner: string): number {
  const done: Key[] = [];
  for (const { oid, mark } of pendingOf(meta, repoId)) if (mark.sync === owner) done.push(K.pending(repoId, oid));
  for (const key of done) meta.removeSync(key);
  return done.length;
}

/** Oids of a repository's pending objects, for readers that skip them (export). */
export function pendingOids(meta: Meta, repoId: string, transaction?: Transaction): Set<string> {
  const out = new Set<string>();
  for (const key of meta.getKeys({ ...Ranges.pending(repoId), transaction })) out.add(lastPart(key));
  return out;
}
