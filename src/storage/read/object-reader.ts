import type { Database, Key, Transaction } from 'lmdb';
import { ServiceError, storageUnavailable } from '../../errors.js';
import { EMPTY_TREE_OID } from '../../vcs/git-object.js';
import type { ObjectType } from '../../vcs/object-store.js';
import type { Storage } from '../database.js';
import { decodeObjectValue, storedObjectSize, storedObjectType, type ObjectInfo } from '../git-object-store.js';
import { K } from '../keys.js';

/**
 * A repository's objects for readers that run long: git's upload-pack walks and sends for as
 * long as the client takes to read. Objects never change once stored, so they need not come from
 * the snapshot the caller read its refs from: reads go through an LMDB read transaction renewed
 * every SNAPSHOT_MS, and ended while the caller waits for its client or for the writers
 * (`release`). They leave with their repository, with the blob collector (never referenced ones),
 * or with this node's copy of their shard (rebuilt after it diverged, or replaced by a new copy):
 * a reader then meets an object the refs reach but the store no longer holds, `vanished`, and its
 * client tries again.
 * A snapshot held for a whole clone kept LMDB from reusing the pages that writes free meanwhile,
 * for as long as the client took: the file grows instead, and beside 8 readers holding snapshots
 * of 1.2 s each commit waited 1.8–2.3× as long for the disk
 * (docs/measurements/2026-11-28-clone-snapshots.md).
 * Values are read zero-copy: a `view` is valid only until the next read of this thread, so
 * callers copy what they keep.
 *
 * The empty tree is never required to be stored (writers refer to it by its well-known oid), so
 * it is answered here when the repository does not hold it.
 */
const EMPTY_TREE_VALUE = Buffer.from([2]);

type FastGet = (key: Key, options: { transaction: Transaction }) => Buffer | undefined;

/** lmdb-js's zero-copy read within a given transaction (its typings omit the options argument). */
function viewIn(db: Database<unknown, Key>, key: Key, txn: Transaction): Buffer | undefined {
  const view = (db.getBinaryFast as unknown as FastGet).call(db, key, { transaction: txn });
  return view && view.subarray(0, view.length);
}

/** Values up to this size are kept once read, while the snapshot's budget lasts. */
const KEPT_VALUE_BYTES = 64 * 1024;
/** Kept values are copied side by side into slabs of this size: one allocation for thousands of trees. */
const SLAB_BYTES = 1024 * 1024;

const OID_HEX = 40;

/** The longest a snapshot is used before the next read renews it. */
const SNAPSHOT_MS = 50;

/** An object the refs reached that a later snapshot no longer holds (see above): retryable, not corruption. */
export function vanished(what: string, oid: string): ServiceError {
  return storageUnavailable(`${what} ${oid} is no longer stored here (the repository was deleted or its copy replaced meanwhile); try again`);
}

export class ObjectReader {
  private readonly kept = new Map<string, Buffer>();
  private budget: number;
  private slab: Buffer | null = null;
  private slabUsed = 0;
  /** An object's key, reused: the repository's prefix, then the oid written in place. */
  private readonly objectKey: Buffer;
  private readonly oidAt: number;
  private txn: Transaction | null = null;
  private takenAt = 0;
  private readonly now: () => number;

  /**
   * `keepBytes`: how much of what is read may be kept for a second read (git reads every commit
   * and tree twice, once to walk and once to send; an LMDB read costs far more than a copy).
   * `now`: the clock that ages a snapshot (a test's own, so that its ages do not depend on the
   * machine's speed).
   */
  constructor(
    readonly storage: Storage,
    readonly repoId: string,
    { keepBytes = 0, now = () => performance.now() }: { keepBytes?: number; now?: () => number } = {},
  ) {
    this.budget = keepBytes;
    this.now = now;
    const prefix = K.objectKeyPrefix(repoId);
    this.objectKey = Buffer.alloc(prefix.length + OID_HEX);
    prefix.copy(this.objectKey);
    this.oidAt = prefix.length;
  }

  /** The current snapshot, renewed when it has been used for SNAPSHOT_MS. */
  private snapshot(): Transaction {
    const now = this.now();
    if (this.txn && now - this.takenAt < SNAPSHOT_MS) return this.txn;
    // Also resets the thread's read transaction, so that the next one is a new snapshot.
    this.release();
    this.txn = this.storage.root.useReadTransaction();
    this.takenAt = now;
    return this.txn;
  }

  /** Lets LMDB reuse what the snapshot holds; the next read takes a new one. Views read so far end. */
  release(): void {
    this.txn?.done();
    this.txn = null;
    // lmdb-js hands out the thread's read transaction until a timer resets it, which a thread
    // blocked in a wait (a pack stepping aside for the writers) does not reach: reset it now, this
    // reader's or one another read of the thread left open (another reader keeps its own).
    this.storage.root.resetReadTxn();
  }

  private key(oid: string): Key {
    if (oid.length !== OID_HEX) return K.object(this.repoId, oid);
    this.objectKey.write(oid, this.oidAt, OID_HEX, 'latin1');
    return this.objectKey;
  }

  /**
   * The stored value (type byte first, see git-object-store.ts) as a view, or undefined. With
   * `retain`, a value that will be read again is kept while the budget lasts.
   */
  view(oid: string, retain = false): Buffer | undefined {
    const kept = this.kept.get(oid);
    if (kept) return kept;
    const view = viewIn(this.storage.objects, this.key(oid), this.snapshot());
    if (!view) return oid === EMPTY_TREE_OID ? EMPTY_TREE_VALUE : undefined;
    return retain && view.length <= KEPT_VALUE_BYTES ? this.keep(oid, view) : view;
  }

  /** A copy of `view` in the current slab (or a new one while the budget lasts); the view itself once it is spent. */
  private keep(oid: string, view: Buffer): Buffer {
    if (!this.slab || this.slabUsed + view.length > this.slab.length) {
      if (view.length > Math.min(SLAB_BYTES, this.budget)) return view;
      const size = Math.min(SLAB_BYTES, this.budget);
      this.budget -= size;
      this.slab = Buffer.allocUnsafe(size);
      this.slabUsed = 0;
    }
    const copy = this.slab.subarray(this.slabUsed, this.slabUsed + view.length);
    view.copy(copy);
    this.slabUsed += view.length;
    this.kept.set(oid, copy);
    return copy;
  }

  /** Like `view` with `retain`, but the bytes stay valid: kept, or copied. */
  stableView(oid: string): Buffer | undefined {
    const view = this.view(oid, true);
    return view && (view === this.kept.get(oid) || view === EMPTY_TREE_VALUE ? view : Buffer.from(view));
  }

  /**
   * Whether the repository holds the object, as the export sees it: an object still pending (an
   * upload nothing references yet, a pull's objects before it applies) is not part of it.
   */
  has(oid: string): boolean {
    // Both reads from one snapshot: a renewal between them could pair an object with the pending
    // mark of a later state, in which the collector has removed it.
    const txn = this.snapshot();
    const stored = this.kept.has(oid) || oid === EMPTY_TREE_OID || viewIn(this.storage.objects, this.key(oid), txn) !== undefined;
    return stored && viewIn(this.storage.meta, K.pending(this.repoId, oid), txn) === undefined;
  }

  /** Type and size without decoding the content. */
  typeAndSize(oid: string): { type: ObjectType; size: number } | undefined {
    const view = this.view(oid);
    if (!view) return undefined;
    return { type: storedObjectType(oid, view), size: storedObjectSize(view) };
  }

  /** The decoded object (content copied or inflated), for small objects: never a chunked blob's content. */
  info(oid: string): ObjectInfo | undefined {
    const view = this.view(oid);
    if (!view) return undefined;
    const info = decodeObjectValue(oid, view);
    return info.chunked ? info : { ...info, content: Buffer.from(info.content) };
  }

  /** Piece `index` of a chunked blob, as a view. */
  chunk(uploadId: string, index: number): Buffer {
    const view = viewIn(this.storage.chunks, K.chunk(this.repoId, uploadId, index), this.snapshot());
    if (!view) throw vanished(`chunk ${index} of upload`, uploadId);
    return view;
  }
}
