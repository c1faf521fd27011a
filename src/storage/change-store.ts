import type { Database, Key } from 'lmdb';
import { NULL_OID, ROOT_CHANGE_ID } from '../vcs/ids.js';
import type { Storage } from './database.js';
import { LmdbObjectStore } from './git-object-store.js';
import { K, under } from './keys.js';
import type { RecordReader } from './read/record-cache.js';
import type { ChangeRecord, EvolutionRecord } from './records.js';

/**
 * Changes, their commits and their evolution (API §5). Reads work on any thread — inside an
 * actor's write transaction or on the front end's snapshot — because LMDB reads are synchronous.
 *
 * Invariants kept by the writers below: every commit written for a change is indexed under
 * `['r', repo, 'commit', oid]` (and kept forever); `['r', repo, 'kid', parent, child]` lists every
 * change's children, so a rebase finds descendants without scanning the repository.
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
  for (const _ of meta.getKeys({ ...under(['r', repoId, 'chg']), limit: 1 })) return false;
  return true;
}

export function childrenOf(meta: Meta, repoId: string, changeId: string): string[] {
  const out: string[] = [];
  for (const key of meta.getKeys(under(['r', repoId, 'kid', changeId]))) out.push((key as string[])[4]!);
  return out;
}

export function generationOf(meta: Meta, repoId: string, changeId: string): number {
  if (changeId === ROOT_CHANGE_ID) return 0;
  return getChange(meta, repoId, changeId)?.generation ?? 0;
}

/**
 * Inserts a new change (synchronously, in the caller's transaction): the record, its commit's
 * index entry and the children index. `generation` is computed from the parents (which must
 * exist) unless the caller, holding the parent records, passes it.
 */
export function putNewChange(meta: Meta, repoId: string, change: Omit<ChangeRecord, 'generation'>, generation?: number): ChangeRecord {
  if (generation === undefined) {
    generation = 1;
    for (const parent of change.parents) generation = Math.max(generation, generationOf(meta, repoId, parent) + 1);
  }
  const record: ChangeRecord = { ...change, generation };
  meta.putSync(K.change(repoId, record.id), record);
  meta.putSync(K.commit(repoId, record.commit_oid), record.id);
  for (const parent of record.parents) meta.putSync(K.child(repoId, parent, record.id), true);
  return record;
}

/** Stores a change's new state (a new commit, same id and parents) and indexes the commit. */
export function putChange(meta: Meta, repoId: string, record: ChangeRecord): void {
  meta.putSync(K.change(repoId, record.id), record);
  meta.putSync(K.commit(repoId, record.commit_oid), record.id);
}

/**
 * Stores a change whose commit came with other parents (a pushed commit that moved it, API §14):
 * the children index follows, and so do generations, recomputed for the change and then for
 * every descendant whose own generation changes. Returns every record it rewrote.
 */
export function putReparentedChange(meta: Meta, repoId: string, record: ChangeRecord, oldParents: readonly string[]): ChangeRecord[] {
  for (const parent of oldParents) meta.removeSync(K.child(repoId, parent, record.id));
  for (const parent of record.parents) meta.putSync(K.child(repoId, parent, record.id), true);
  const generationFrom = (parents: readonly string[]): number => Math.max(1, ...parents.map((p) => generationOf(meta, repoId, p) + 1));
  const first: ChangeRecord = { ...record, generation: generationFrom(record.parents) };
  putChange(meta, repoId, first);
  const rewritten = [first];
  const queue = first.generation === record.generation ? [] : childrenOf(meta, repoId, first.id);
  while (queue.length > 0) {
    const child = getChange(meta, repoId, queue.shift()!);
    if (!child) continue;
    const generation = generationFrom(child.parents);
    if (generation === child.generation) continue;
    const updated = { ...child, generation };
    meta.putSync(K.change(repoId, updated.id), updated);
    rewritten.push(updated);
    queue.push(...childrenOf(meta, repoId, updated.id));
  }
  return rewritten;
}

export function putEvolution(meta: Meta, repoId: string, changeId: string, id: string, record: EvolutionRecord): void {
  meta.putSync(K.evolution(repoId, changeId, id), record);
}

/** A change's evolution, newest first, starting after the entry `beforeId` (exclusive) when given. */
export function* evolutionOf(meta: Meta, repoId: string, changeId: string, beforeId?: string): Generator<{ id: string; record: EvolutionRecord }> {
  const range = under(['r', repoId, 'evo', changeId]);
  const start: Key = beforeId ? K.evolution(repoId, changeId, beforeId) : range.end;
  for (const { key, value } of meta.getRange({ start, end: range.start, reverse: true })) {
    const id = (key as string[])[4]!;
    if (id !== beforeId) yield { id, record: value as EvolutionRecord };
  }
}

/**
 * True when `ancestorId` is `descendantId` or one of its ancestors, walking parent change ids
 * (the virtual root is everyone's ancestor). Generations prune the walk: a change can only
 * descend from changes of a lower generation.
 */
export function isChangeAncestor(meta: Meta, repoId: string, ancestorId: string, descendantId: string): boolean {
  if (ancestorId === descendantId || ancestorId === ROOT_CHANGE_ID) return true;
  if (descendantId === ROOT_CHANGE_ID) return false;
  const floor = generationOf(meta, repoId, ancestorId);
  const seen = new Set<string>([descendantId]);
  const stack = [descendantId];
  while (stack.length > 0) {
    const change = getChange(meta, repoId, stack.pop()!);
    if (!change) continue;
    for (const parent of change.parents) {
      if (parent === ancestorId) return true;
      if (parent === ROOT_CHANGE_ID || seen.has(parent)) continue;
      seen.add(parent);
      if (generationOf(meta, repoId, parent) > floor) stack.push(parent);
    }
  }
  return false;
}

/**
 * The repository's object store; `scratch` keeps derived objects in memory (readers), `observer`
 * accounts for what a writer stores (object-accounting.ts).
 */
export function objectStore(storage: Storage, repoId: string, options: ConstructorParameters<typeof LmdbObjectStore>[2] = {}): LmdbObjectStore {
  return new LmdbObjectStore(storage, repoId, options);
}
