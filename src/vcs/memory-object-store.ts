/**
 * An ObjectStore in a Map: the simple backend (like jj's `simple_backend`) for unit tests and for
 * scratch computations whose objects are thrown away.
 */
import { hashObject } from './git-object.js';
import type { GitObject, ObjectStore, ObjectType } from './object-store.js';

export class MemoryObjectStore implements ObjectStore {
  readonly #objects = new Map<string, GitObject>();

  read(oid: string): GitObject | undefined {
    return this.#objects.get(oid);
  }

  size(oid: string): number | undefined {
    return this.#objects.get(oid)?.content.length;
  }

  has(oid: string): boolean {
    return this.#objects.has(oid);
  }

  write(type: ObjectType, content: Uint8Array): string {
    const oid = hashObject(type, content);
    // Copy: the caller may reuse its buffer, and stored objects must never change.
    if (!this.#objects.has(oid)) this.#objects.set(oid, { type, content: Uint8Array.from(content) });
    return oid;
  }

  get objectCount(): number {
    return this.#objects.size;
  }

  /** Every stored object with its oid (e.g. to export them as loose objects). */
  *entries(): IterableIterator<[string, GitObject]> {
    yield* this.#objects.entries();
  }
}
