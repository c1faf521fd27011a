import { ROOT_CHANGE_ID } from './ids.js';
import type { ChangeRecord, RepoStore } from './repo-store.js';

/**
 * The change graph's own invariants, over any `RepoStore`: every change is listed as a child of
 * each of its parents, and its generation is 1 + its parents' largest (the virtual root is 0).
 */

export function generationOf(store: RepoStore, changeId: string): number {
  if (changeId === ROOT_CHANGE_ID) return 0;
  return store.change(changeId)?.generation ?? 0;
}

/**
 * Inserts a new change: the record, its commit's index entry and the children index.
 * `generation` is computed from the parents (which must exist) unless the caller, holding the
 * parent records, passes it.
 */
export function insertChange(store: RepoStore, change: Omit<ChangeRecord, 'generation'>, generation?: number): ChangeRecord {
  if (generation === undefined) {
    generation = 1;
    for (const parent of change.parents) generation = Math.max(generation, generationOf(store, parent) + 1);
  }
  const record: ChangeRecord = { ...change, generation };
  store.putChange(record);
  for (const parent of record.parents) store.addChild(parent, record.id);
  return record;
}

/**
 * Stores a change whose commit came with other parents (a pushed commit that moved it, API §14):
 * the children index follows, and so do generations, recomputed for the change and then for
 * every descendant whose own generation changes. Returns every record it rewrote.
 */
export function reparentChange(store: RepoStore, record: ChangeRecord, oldParents: readonly string[]): ChangeRecord[] {
  for (const parent of oldParents) store.removeChild(parent, record.id);
  for (const parent of record.parents) store.addChild(parent, record.id);
  const generationFrom = (parents: readonly string[]): number => Math.max(1, ...parents.map((p) => generationOf(store, p) + 1));
  const first: ChangeRecord = { ...record, generation: generationFrom(record.parents) };
  store.putChange(first);
  const rewritten = [first];
  const queue = first.generation === record.generation ? [] : store.children(first.id);
  while (queue.length > 0) {
    const child = store.change(queue.shift()!);
    if (!child) continue;
    const generation = generationFrom(child.parents);
    if (generation === child.generation) continue;
    const updated = { ...child, generation };
    store.putChange(updated);
    rewritten.push(updated);
    for (const id of store.children(updated.id)) queue.push(id);
  }
  return rewritten;
}

/**
 * True when `ancestorId` is `descendantId` or one of its ancestors, walking parent change ids
 * (the virtual root is everyone's ancestor). Generations prune the walk: a change can only
 * descend from changes of a lower generation.
 */
export function isChangeAncestor(store: RepoStore, ancestorId: string, descendantId: string): boolean {
  if (ancestorId === descendantId || ancestorId === ROOT_CHANGE_ID) return true;
  if (descendantId === ROOT_CHANGE_ID) return false;
  const floor = generationOf(store, ancestorId);
  const seen = new Set<string>([descendantId]);
  const stack = [descendantId];
  while (stack.length > 0) {
    const change = store.change(stack.pop()!);
    if (!change) continue;
    for (const parent of change.parents) {
      if (parent === ancestorId) return true;
      if (parent === ROOT_CHANGE_ID || seen.has(parent)) continue;
      seen.add(parent);
      if (generationOf(store, parent) > floor) stack.push(parent);
    }
  }
  return false;
}
