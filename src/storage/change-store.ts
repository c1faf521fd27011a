import type { Database, Key } from 'lmdb';
import { NULL_OID, ROOT_CHANGE_ID } from '../vcs/ids.js';
import type { Storage } from './database.js';
import { LmdbObjectStore } from './git-object-store.js';
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




/** A change's evolution, newest first, starting after the entry `beforeId` (exclusive) when given. */
export function* evolutionOf(meta: Meta, repoId: string, changeId: string, beforeId?: string): Generator<{ id: string; record: EvolutionRecord }> {
  const range = Ranges.evolutions(repoId, changeId);
  const start: Key = beforeId ? K.evolution(repoId, changeId, beforeId) : range.end;
  for (const { key, value } of meta.getRange({ start, end: range.start, reverse: true })) {
    const id = lastPart(key);
    if (id !== beforeId) yield { id, record: value as EvolutionRecord };
  }
}


/**
 * The repository's object store; `scratch` keeps derived objects in memory (readers), `observer`
 * accounts for what a writer stores (object-accounting.ts).
 */
export function objectStore(storage: Storage, repoId: string, options: ConstructorParameters<typeof LmdbObjectStore>[2] = {}): LmdbObjectStore {
  return new LmdbObjectStore(storage, repoId, options);
}
