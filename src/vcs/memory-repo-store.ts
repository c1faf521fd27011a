/**
 * A RepoStore in Maps: the simple backend of one repository's change graph, for unit tests of the
 * model (like `MemoryObjectStore` for objects).
 */
import type { BookmarkRecord, ChangeRecord, EvolutionRecord, OperationRecord, RepoStore } from './repo-store.js';

export class MemoryRepoStore implements RepoStore {
  readonly #changes = new Map<string, ChangeRecord>();
  readonly #commits = new Map<string, string>();
  readonly #children = new Map<string, Set<string>>();
  readonly #bookmarks = new Map<string, BookmarkRecord>();
  readonly #evolution = new Map<string, EvolutionRecord[]>();
  readonly #operations = new Map<string, OperationRecord>();

  change(changeId: string): ChangeRecord | undefined {
    return this.#changes.get(changeId);
  }

  putChange(record: ChangeRecord): void {
    this.#changes.set(record.id, record);
    this.#commits.set(record.commit_oid, record.id);
  }

  changeOfCommit(oid: string): string | undefined {
    return this.#commits.get(oid);
  }

  hasChanges(): boolean {
    return this.#changes.size > 0;
  }

  /** In id order, as a sorted key range lists them. */
  children(changeId: string): string[] {
    return [...(this.#children.get(changeId) ?? [])].sort();
  }

  addChild(parentId: string, childId: string): void {
    let kids = this.#children.get(parentId);
    if (!kids) this.#children.set(parentId, (kids = new Set()));
    kids.add(childId);
  }

  removeChild(parentId: string, childId: string): void {
    this.#children.get(parentId)?.delete(childId);
  }

  bookmark(name: string): BookmarkRecord | undefined {
    return this.#bookmarks.get(name);
  }

  putBookmark(record: BookmarkRecord): void {
    this.#bookmarks.set(record.name, record);
  }

  removeBookmark(name: string): void {
    this.#bookmarks.delete(name);
  }

  appendEvolution(changeId: string, record: EvolutionRecord): void {
    let entries = this.#evolution.get(changeId);
    if (!entries) this.#evolution.set(changeId, (entries = []));
    entries.push(record);
  }

  putOperation(record: OperationRecord): void {
    this.#operations.set(record.id, record);
  }

  /** A change's evolution entries, oldest first. */
  evolution(changeId: string): readonly EvolutionRecord[] {
    return this.#evolution.get(changeId) ?? [];
  }

  operation(id: string): OperationRecord | undefined {
    return this.#operations.get(id);
  }
}
