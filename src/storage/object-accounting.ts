import type { Database, Key } from 'lmdb';
import type { ObjectWriteObserver } from './git-object-store.js';
import { dropPending, getPending, markPending } from './pending-objects.js';
import { addBytes, assertRoom } from './quota.js';

/**
 * What storing objects costs and means, for one writer inside its transaction. Every new object
 * adds its size to the charge that `settle` puts on the org's quota; what a write means decides
 * the pending marks (pending-objects.ts):
 *
 * - `reference`: a change write (its tree comes to contain the objects): new objects are
 *   referenced from the start, and a stored object it meets loses its pending mark;
 * - `upload`: `POST …/blobs`: a new blob is pending from now; uploading a pending one again
 *   restarts its retention;
 * - `fetch`: a received pack's objects (a pull's, or a git push's early batches) are pending under
 *   their owner (the sync or the push) until its refs land; a pending object the pack meets again
 *   is taken over by this owner, so that landing the refs references that one too.
 */
export type StoreIntent = { kind: 'reference' } | { kind: 'upload' } | { kind: 'fetch'; owner: string };

export const REFERENCE: StoreIntent = { kind: 'reference' };
export const UPLOAD: StoreIntent = { kind: 'upload' };

type Meta = Database<unknown, Key>;

export class ObjectAccounting implements ObjectWriteObserver {
  private bytes = 0;
  private objects = 0;

  constructor(
    private readonly meta: Meta,
    private readonly repoId: string,
    private readonly intent: StoreIntent,
    /** The writer's clock (ms): when new pending objects were stored. */
    private readonly now: number,
  ) {}

  stored(oid: string, size: number): void {
    this.bytes += size;
    this.objects++;
    if (this.intent.kind === 'reference') return;
    markPending(this.meta, this.repoId, oid, { at: this.now, sync: this.intent.kind === 'fetch' ? this.intent.owner : null });
  }

  existing(oid: string): void {
    if (this.intent.kind === 'reference') {
      dropPending(this.meta, this.repoId, oid);
      return;
    }
    const mark = getPending(this.meta, this.repoId, oid);
    if (!mark) return;
    if (this.intent.kind === 'upload') markPending(this.meta, this.repoId, oid, { ...mark, at: this.now });
    else if (mark.sync !== this.intent.owner) markPending(this.meta, this.repoId, oid, { ...mark, sync: this.intent.owner });
  }

  /**
   * Puts what was stored since the last settle on the repository's and its shard's counters, or
   * refuses it with 413 QUOTA_EXCEEDED when the shard's allowance of the org's quota cannot take
   * it (`limit` 0: unlimited). The caller's transaction must then roll back, which takes the
   * objects and marks with it. Run inside the writer's transaction, so writers on the shard see
   * each other's charges.
   */
  settle(orgId: string, limit: number): void {
    if (this.objects === 0) return;
    assertRoom(this.meta, orgId, this.repoId, limit, this.bytes);
    addBytes(this.meta, orgId, this.repoId, this.bytes);
    this.bytes = 0;
    this.objects = 0;
  }
}
