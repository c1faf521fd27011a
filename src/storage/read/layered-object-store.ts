/**
 * An ObjectStore for computations on the read path (materialized views of conflicted commits):
 * reads fall through an in-memory overlay and any read-only layers (views computed earlier) to
 * the repository's stored objects; writes land only in the overlay. The read path never writes
 * to LMDB; what a computation produced can be kept, and shipped between threads, as the
 * overlay's objects.
 */
import { MemoryObjectStore } from '../../vcs/memory-object-store.js';
import type { GitObject, ObjectStore, ObjectType } from '../../vcs/object-store.js';

export class LayeredObjectStore implements ObjectStore {
  constructor(
    private readonly base: ObjectStore,
    readonly overlay: MemoryObjectStore = new MemoryObjectStore(),
    private readonly layers: readonly ObjectStore[] = [],
  ) {}

  read(oid: string): GitObject | undefined {
    const own = this.overlay.read(oid);
    if (own) return own;
    for (const layer of this.layers) {
      const found = layer.read(oid);
      if (found) return found;
    }
    return this.base.read(oid);
  }

  size(oid: string): number | undefined {
    const own = this.overlay.size(oid);
    if (own !== undefined) return own;
    for (const layer of this.layers) {
      const found = layer.size(oid);
      if (found !== undefined) return found;
    }
    return this.base.size(oid);
  }

  has(oid: string): boolean {
    return this.overlay.has(oid) || this.layers.some((l) => l.has(oid)) || this.base.has(oid);
  }

  write(type: ObjectType, content: Uint8Array): string {
    return this.overlay.write(type, content);
  }
}
