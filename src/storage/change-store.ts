import type { Database, Key } from 'lmdb';
import { NULL_OID, ROOT_CHANGE_ID } from '../vcs/ids.js';
import type { Storage } from './database.js';
import { LmdbObjectStore } from './git-object-store.js';
import { LmdbRepoStore } from './lmdb-repo-store.js';
import { insertChange, isChangeAncestor as isAncestor } from '../vcs/change-graph.js';
import { K, lastPart, Ranges } from './keys.js';
import type { RecordReader } from './read/record-cache.js';
import type { ChangeRecord, EvolutionRecord } from './records.js';

/**
 * Changes, their commits and their evolution (API §5). Reads work on any thread — inside an
 * actor's write transaction or on the front end's snapshot — because LMDB reads are synchronous.
 * Writes go through `LmdbRepoStore` (lmdb-repo-store.ts), which keeps the commit index beside
 * each change; the graph's own invariants are src/vcs/change-graph.ts's.
 */
type Meta = Database<unknown, Key>;

export function getChange(meta: RecordReader, repoId: string, changeId: string): ChangeRecord | undefined {
  return meta.get(K.change(repoId, changeId)) as ChangeRecord | undefined;
}

/** The current commit of a change as views and events show it: the null oid for the virtual root. */
export function commitOidOf(meta: RecordReader, repoId: string, changeId: string): string | undefined {
  return changeId === ROOT_CHANGE_ID ? NULL_OID : getChange(meta, repoId, changeId)?.commit_oid;
}

/** The change a commit of this repository belongs to, or undefined when it names no commit of it. */
export function changeIdOfCommitOid(meta: Meta, repoId: string, oid: string): string | undefined {
  return meta.get(K.commit(repoId, oid)) as string | undefined;
}

/** True when the repository has no change yet. */
export function isRepositoryEmpty(meta: Meta, repoId: string): boolean {
  return !new LmdbRepoStore(meta, repoId).hasChanges();
}

/** Inserts a new change in the caller's transaction (change-graph.ts `insertChange`). */
export function putNewChange(meta: Meta, repoId: string, change: Omit<ChangeRecord, 'generation'>, generation?: number): ChangeRecord {
  return insertChange(new LmdbRepoStore(meta, repoId), change, generation);
}

/** Appends an entry to a change's evolution, in the caller's transaction. */
export function putEvolution(meta: Meta, repoId: string, changeId: string, record: EvolutionRecord, at: number): void {
  new LmdbRepoStore(meta, repoId).appendEvolution(changeId, record, at);
}

/** A change's evolution, newest first, starting after the entry `beforeId` (exclusive) when given. */
export function* evolutionOf(meta: Meta, repoId: string, changeId: string, beforeId?: string): Generator<{ id: string; record: EvolutionRecord }> {
  const range = Ranges.evolutions(repoId, changeId);
  const start: Key = beforeId ? K.evolution(repoId, changeId, beforeId) : range.end;
  for (const { key, value } of meta.getRange({ start, end: range.start, reverse: true })) {
    const id = lastPart(key);
    if (id !== beforeId) yield { id, record: value as EvolutionRecord };
  }
}

/** True when `ancestorId` is `descendantId` or one of its ancestors (change-graph.ts). */
export function isChangeAncestor(meta: Meta, repoId: string, ancestorId: string, descendantId: string): boolean {
  return isAncestor(new LmdbRepoStore(meta, repoId), ancestorId, descendantId);
}

/**
 * The repository's object store; `scratch` keeps derived objects in memory (readers), `observer`
 * accounts for what a writer stores (object-accounting.ts).
 */
export function objectStore(storage: Storage, repoId: string, options: ConstructorParameters<typeof LmdbObjectStore>[2] = {}): LmdbObjectStore {
  return new LmdbObjectStore(storage, repoId, options);
}
