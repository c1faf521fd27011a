import type { Database, Key } from 'lmdb';
import type { BookmarkRecord, ChangeRecord, EvolutionRecord, OperationRecord, RepoStore } from '../vcs/repo-store.js';
import { ulid } from './ids.js';
import { K, lastPart, Ranges } from './keys.js';
import { getBookmark, putBookmark, removeBookmark } from './repo-store.js';

/**
 * A repository's change graph in the `meta` database (keys.ts: `chg`, `commit`, `kid`, `bm`, `evo`,
 * `op` under `['r', repoId]`). Writes are synchronous, in the caller's write transaction; reads
 * also work on a read snapshot.
 */
export class LmdbRepoStore implements RepoStore {
  constructor(
    private readonly meta: Database<unknown, Key>,
    readonly repoId: string,
  ) {}

  change(changeId: string): ChangeRecord | undefined {
    return this.meta.get(K.change(this.repoId, changeId)) as ChangeRecord | undefined;
  }

  putChange(record: ChangeRecord): void {
    this.meta.putSync(K.change(this.repoId, record.id), record);
    this.meta.putSync(K.commit(this.repoId, record.commit_oid), record.id);
  }

  changeOfCommit(oid: string): string | undefined {
    return this.meta.get(K.commit(this.repoId, oid)) as string | undefined;
  }

  hasChanges(): boolean {
    for (const _ of this.meta.getKeys({ ...Ranges.changes(this.repoId), limit: 1 })) return true;
    return false;
  }

  children(changeId: string): string[] {
    const out: string[] = [];
    for (const key of this.meta.getKeys(Ranges.children(this.repoId, changeId))) out.push(lastPart(key));
    return out;
  }

  addChild(parentId: string, childId: string): void {
    this.meta.putSync(K.child(this.repoId, parentId, childId), true);
  }

  removeChild(parentId: string, childId: string): void {
    this.meta.removeSync(K.child(this.repoId, parentId, childId));
  }

  bookmark(name: string): BookmarkRecord | undefined {
    return getBookmark(this.meta, this.repoId, name);
  }

  putBookmark(record: BookmarkRecord): void {
    putBookmark(this.meta, this.repoId, record);
  }

  removeBookmark(name: string): void {
    removeBookmark(this.meta, this.repoId, name);
  }

  appendEvolution(changeId: string, record: EvolutionRecord, at: number): void {
    this.meta.putSync(K.evolution(this.repoId, changeId, ulid(at)), record);
  }

  putOperation(record: OperationRecord): void {
    this.meta.putSync(K.operation(this.repoId, record.id), record);
  }
}
