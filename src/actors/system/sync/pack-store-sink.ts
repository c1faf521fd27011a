/**
 * Where a received pack goes as it is read (the `PackSink` of pack-reader.ts): a pull's pack from
 * an upstream, or a pack git pushes to us. Objects are stored in short transactions (other
 * writers wait on the same lock) of at most `BATCH_OBJECTS` objects or `BATCH_BYTES` bytes, each
 * batch charged to its shard's allowance of the org's quota (refilled between batches when it
 * runs short, `target.refill`) and pending under its owner (the sync or the push,
 * pending-objects.ts) until the refs that reach them land; blobs over 1 MiB are staged in chunks
 * as they arrive (blob-store.ts) and committed by the next batch. A batch that does not fit the
 * quota takes back everything the owner stored, so a refused pack keeps nothing. A push keeps its
 * last batch in memory (`take`): its objects then commit with its refs, in the push's own
 * transaction on the repository's actor.
 *
 * Delta bases are read back from the current batch, the staged blobs, or the database (a large
 * base chunk by chunk). The connectivity check keeps only the oids that received objects name
 * and that are neither stored nor received yet; a pack never needs more of them than it may
 * hold objects, which bounds that set. A stored object that is itself still pending (an upload,
 * what a failed pull left) is not known to be complete: what it names is checked the same way,
 * and it is remembered (`pendingRefs`) so that it stops being collectable when the pack lands.
 *
 * Failures are `PackError`s in words the receiver can show as they are (a pull prefixes them
 * with its upstream; a push sends them to git), or the ServiceError of the quota.
 */
import { COMMIT_THEN_SYNC } from '../../../storage/commit-flags.js';
import type { Storage } from '../../../storage/database.js';
import { isServiceError, notFound } from '../../../errors.js';
import { BlobStager, commitStagedBlob, discardUpload, forgetStaging, type StagedBlob } from '../../../storage/blob-store.js';
import { discardFetched } from '../../../storage/blob-collect.js';
import { objectStore } from '../../../storage/change-store.js';
import { CHUNK_SIZE, decodeObjectValue, encodeInlineObject, isObjectStored, readChunk, storedObjectValue, type PreparedObject } from '../../../storage/git-object-store.js';
import { ObjectAccounting } from '../../../storage/object-accounting.js';
import { getPending, pendingOf } from '../../../storage/pending-objects.js';
import { assertRoom, refusalAfterRefill, shortfallOf } from '../../../storage/quota.js';
import type { Refill } from '../../allowance-port.js';
import { getRepo } from '../../../storage/repo-store.js';
import { assertDiskRoom } from '../../../storage/disk-room.js';
import { parseCommit, parseTree } from '../../../vcs/git-object.js';
import { checkObject } from '../../../vcs/object-check.js';
import type { GitObject, ObjectType } from '../../../vcs/object-store.js';
import { PackError, type LargeBlobWriter, type PackBase, type PackObject, type PackSink } from './pack-reader.js';

const BATCH_OBJECTS = 2000;
const BATCH_BYTES = 8 * 1024 * 1024;

/** Where a pack is stored: its repository, the owner of its pending marks, the org quota. */
export interface PackStoreTarget {
  repoId: string;
  /** The sync (a pull) or the push whose pack this is: its objects are pending under this id. */
  owner: string;
  quotaBytes: number;
  /** Asks the org for more allowance on the repository's shard when a batch does not fit it (allowance-port.ts). */
  refill: Refill | null;
  /** The data directory and REPOHOST_MIN_FREE_BYTES: storing stops (503) before the disk is that full. */
  disk: { dataDir: string; minFreeBytes: number };
}

/**
 * Bytes received between two looks at the disk's free space. What a pack stores is not its size:
 * a few KiB of deltas can expand to gigabytes, and a commit LMDB cannot extend its file for has
 * aborted the process (disk-room.ts), so the disk is watched while the pack is stored.
 */
const DISK_CHECK_BYTES = 16 * 1024 * 1024;

export interface PackStoreOptions {
  /** Refs this many oids still missing, or pending objects named, make the pack refused. */
  maxExpected: number;
  /** Check every commit, tree and tag as `git fsck --strict` does (objects pushed by a client). */
  strict: boolean;
}

/** What a push's pack left for its own transaction: the last batch, and the pending objects it names. */
export interface PackRest {
  objects: PreparedObject[];
  staged: StagedBlob[];
  pendingRefs: string[];
  /** Whether earlier batches were stored (pending under the owner). */
  storedEarlier: boolean;
}

const OID = /^[0-9a-f]{40}$/;

/** The oids a stored or trusted object refers to that must exist for it to be usable (gitlinks excepted). */
function referencesOf(object: GitObject): string[] {
  try {
    if (object.type === 'commit') {
      const commit = parseCommit(object.content);
      const refs = [commit.tree, ...commit.parents];
      if (refs.every((oid) => OID.test(oid))) return refs;
    } else if (object.type === 'tree') {
      return parseTree(object.content)
        .filter((e) => e.mode !== '160000')
        .map((e) => e.oid);
    } else if (object.type === 'tag') {
      const m = /^object ([0-9a-f]{40})\n/.exec(Buffer.from(object.content).toString('latin1', 0, 48));
      if (m) return [m[1]!];
    } else return [];
  } catch {
    // The parser's message may quote the object; ours below does not.
  }
  throw new PackError(`a malformed ${object.type} object`);
}

function memoryBase(type: ObjectType, content: Uint8Array): PackBase {
  return { type, size: content.length, read: (offset, length) => content.subarray(offset, offset + length) };
}

/** A chunked blob read back a chunk at a time (the last chunk read is kept: copies come in order). */
function chunkedBase(storage: Storage, repoId: string, uploadId: string, size: number): PackBase {
  let cached: { index: number; bytes: Buffer } | null = null;
  const chunk = (index: number): Buffer => {
    if (cached?.index !== index) cached = { index, bytes: readChunk(storage, repoId, uploadId, index) };
    return cached.bytes;
  };
  return {
    type: 'blob',
    size,
    read(offset, length) {
      const first = Math.floor(offset / CHUNK_SIZE);
      const last = Math.floor((offset + length - 1) / CHUNK_SIZE);
      if (first === last) return chunk(first).subarray(offset - first * CHUNK_SIZE, offset - first * CHUNK_SIZE + length);
      const parts: Buffer[] = [];
      for (let i = first; i <= last; i++) {
        const start = i === first ? offset - i * CHUNK_SIZE : 0;
        const end = i === last ? offset + length - i * CHUNK_SIZE : CHUNK_SIZE;
        parts.push(chunk(i).subarray(start, end));
      }
      return Buffer.concat(parts, length);
    },
  };
}

const repoGone = (): Error => notFound('REPO_NOT_FOUND', 'the repository was deleted while the pack was received');

export class PackStoreSink implements PackSink {
  /** When the pack's new objects became pending. */
  private readonly startedAt = Date.now();
  private readonly orgId: string;
  private batch = new Map<string, PreparedObject>();
  private staged = new Map<string, StagedBlob>();
  private bytes = 0;
  private storedBatches = 0;
  /** Bytes received since the disk was last looked at. */
  private sinceDiskCheck = 0;
  /** Oids named by received objects, neither stored nor received yet. */
  private readonly expected = new Set<string>();
  /** Stored objects still pending under another owner that received objects name. */
  private readonly pendingRefs = new Set<string>();

  constructor(
    private readonly storage: Storage,
    private readonly target: PackStoreTarget,
    private readonly options: PackStoreOptions,
  ) {
    const repo = getRepo(storage.meta, target.repoId);
    if (!repo) throw repoGone();
    this.orgId = repo.org_id;
  }

  /**
   * Every DISK_CHECK_BYTES received, refuses (503) when what may be written before the next look
   * (those bytes again, and a batch received but not stored yet) could leave the disk under its
   * reserve; what the pack stored is taken back first, for a pull as for a push.
   */
  private async watchDisk(bytes: number): Promise<void> {
    this.sinceDiskCheck += bytes;
    if (this.sinceDiskCheck < DISK_CHECK_BYTES) return;
    this.sinceDiskCheck = 0;
    try {
      assertDiskRoom(this.target.disk.dataDir, DISK_CHECK_BYTES + BATCH_BYTES, this.target.disk.minFreeBytes);
    } catch (err) {
      await this.discard();
      throw err;
    }
  }

  private storedValue(oid: string): Buffer | undefined {
    return storedObjectValue(this.storage, this.target.repoId, oid);
  }

  private stored(oid: string): boolean {
    return isObjectStored(this.storage, this.target.repoId, oid);
  }

  /**
   * Notes oids that something received (or a pushed ref) names: missing ones are expected later
   * in the pack; a stored one still pending under another owner is walked in its turn.
   */
  reference(oids: readonly string[]): void {
    const { meta } = this.storage;
    const stack = [...oids];
    while (stack.length > 0) {
      const oid = stack.pop()!;
      if (this.batch.has(oid) || this.staged.has(oid) || this.pendingRefs.has(oid)) continue;
      if (!this.stored(oid)) {
        this.expected.add(oid);
        continue;
      }
      const mark = getPending(meta, this.target.repoId, oid);
      if (!mark || mark.sync === this.target.owner) continue;
      this.pendingRefs.add(oid);
      const info = decodeObjectValue(oid, this.storedValue(oid)!);
      if (info.chunked === null && info.type !== 'blob') for (const ref of referencesOf(info)) stack.push(ref);
    }
    if (this.expected.size + this.pendingRefs.size > this.options.maxExpected) throw new PackError('the pack names more missing objects than a pack may hold');
  }

  private received(oid: string, references: readonly string[]): void {
    this.expected.delete(oid);
    this.reference(references);
  }

  private referencesOfReceived(object: PackObject): string[] {
    if (!this.options.strict) return referencesOf(object);
    const check = checkObject(object.type, object.content);
    if ('problem' in check) throw new PackError(`object ${object.oid}: ${check.problem}`);
    return check.references;
  }

  async object(object: PackObject): Promise<void> {
    this.received(object.oid, this.referencesOfReceived(object));
    await this.watchDisk(object.content.length);
    this.batch.set(object.oid, { ...object, value: encodeInlineObject(object.type, object.content) });
    this.bytes += object.content.length;
    if (this.batch.size + this.staged.size >= BATCH_OBJECTS || this.bytes >= BATCH_BYTES) await this.flush();
  }

  largeBlob(size: number): LargeBlobWriter {
    let stager: BlobStager | null = null;
    return {
      write: async (bytes) => {
        if (!stager) {
          // Refused before the bytes go to disk when the blob alone cannot fit.
          await this.withRoom(() => assertRoom(this.storage.meta, this.orgId, this.target.repoId, this.target.quotaBytes, size));
          stager = new BlobStager(this.storage, this.target.repoId, size);
        }
        await this.watchDisk(bytes.length);
        await stager.append(bytes);
      },
      finish: async (oid) => {
        const staged = await stager!.finish();
        if (staged.oid !== oid) throw new PackError('a large object changed while it was stored');
        this.received(oid, []);
        this.staged.set(oid, staged);
        if (this.batch.size + this.staged.size >= BATCH_OBJECTS) await this.flush();
      },
      abort: async () => {
        await stager?.discard();
      },
    };
  }

  base(oid: string): PackBase | undefined {
    const held = this.batch.get(oid);
    if (held) return memoryBase(held.type, held.content);
    const staged = this.staged.get(oid);
    if (staged) return chunkedBase(this.storage, this.target.repoId, staged.upload_id, staged.size);
    const value = this.storedValue(oid);
    if (!value) return undefined;
    const info = decodeObjectValue(oid, value);
    return info.chunked ? chunkedBase(this.storage, this.target.repoId, info.chunked.u, info.size) : memoryBase(info.type, info.content);
  }

  /** Whether the pack, or the repository already, holds `oid`. */
  holds(oid: string): boolean {
    return this.batch.has(oid) || this.staged.has(oid) || this.stored(oid);
  }

  private checkComplete(): void {
    let missing = 0;
    for (const oid of this.expected) if (!this.stored(oid)) missing++;
    if (missing > 0) throw new PackError(`the pack is incomplete: ${missing} objects its objects name are missing`);
  }

  /** A pull: stores the last batch and checks that every object a received one names is there. */
  async finish(): Promise<void> {
    await this.flush(true);
    this.checkComplete();
  }

  /**
   * A push: checks that every object a received one names is there, and hands back what is not
   * stored yet, to be stored with the push's refs. Batches stored earlier stay pending under the
   * push until then.
   */
  take(): PackRest {
    this.checkComplete();
    const rest = { objects: [...this.batch.values()], staged: [...this.staged.values()], pendingRefs: [...this.pendingRefs], storedEarlier: this.storedBatches > 0 };
    this.batch.clear();
    this.staged.clear();
    return rest;
  }

  /** The pack failed: staged blobs that no batch committed are dropped at once. */
  async abandon(): Promise<void> {
    for (const staged of this.staged.values()) await discardUpload(this.storage, this.target.repoId, staged.upload_id);
    this.staged.clear();
    this.batch.clear();
  }

  /** The pack is refused: what it stored is taken back too (objects a write referenced meanwhile stay). */
  async discard(): Promise<void> {
    await this.abandon();
    if (this.storedBatches === 0) return;
    const { repoId, owner } = this.target;
    const mine: string[] = [];
    for (const { oid, mark } of pendingOf(this.storage.meta, repoId)) if (mark.sync === owner) mine.push(oid);
    if (mine.length > 0) discardFetched(this.storage, repoId, owner, mine);
  }

  /**
   * Stores the batch. The last one of a pull also takes over the pending objects the pack names,
   * so that applying the pull references them too (an object that vanished meanwhile, collected,
   * makes the pack incomplete).
   */
  private async flush(last = false): Promise<void> {
    if (this.batch.size === 0 && this.staged.size === 0 && !(last && this.pendingRefs.size > 0)) return;
    const objects = [...this.batch.values()];
    const staged = [...this.staged.values()];
    await this.withRoom(() => this.store(objects, staged, last));
    for (const blob of staged) forgetStaging(blob.upload_id);
    this.storedBatches++;
    this.batch.clear();
    this.staged.clear();
    this.bytes = 0;
    // Let other work of this thread make progress between batches.
    await new Promise((resolve) => setImmediate(resolve));
  }

  /** One transaction storing a batch, all or nothing (a refused one can run again after a refill). */
  private store(objects: PreparedObject[], staged: StagedBlob[], last: boolean): void {
    const { storage } = this;
    const { repoId, owner } = this.target;
    const accounting = new ObjectAccounting(storage.meta, repoId, { kind: 'fetch', owner }, this.startedAt);
    // A store per batch: its cache of small objects lives as long as the batch.
    const store = objectStore(storage, repoId, { observer: accounting });
    storage.root.transactionSync(() => {
      // Checked in the same transaction: objects are never written under a deleted repository.
      const repo = getRepo(storage.meta, repoId);
      if (!repo) throw repoGone();
      for (const object of objects) store.writePrepared(object);
      for (const blob of staged) commitStagedBlob(storage, repoId, blob, accounting);
      if (last) {
        for (const oid of this.pendingRefs) {
          if (!this.stored(oid)) throw new PackError('the pack is incomplete: an object it names was removed while it was received');
          accounting.existing(oid);
        }
      }
      accounting.settle(repo.org_id, this.target.quotaBytes);
      // A batch is megabytes: its sync runs after the write lock is released.
    }, COMMIT_THEN_SYNC);
  }

  /**
   * Runs `attempt`; when the shard's allowance refuses it, asks the org for the missing bytes and
   * runs it once more. A refusal that stands, or any other failure, goes to `refuse`.
   */
  private async withRoom(attempt: () => void): Promise<void> {
    try {
      attempt();
      return;
    } catch (err) {
      const { refill } = this.target;
      if (!isServiceError(err) || err.code !== 'QUOTA_EXCEEDED' || !refill) return this.refuse(err);
      const short = await refill(shortfallOf(err));
      if (short > 0) await this.refuse(refusalAfterRefill(err, short));
    }
    try {
      attempt();
    } catch (err) {
      await this.refuse(err);
    }
  }

  /** A quota refusal takes back everything this owner stored, then passes on; so do other errors, without the taking back. */
  private async refuse(err: unknown): Promise<never> {
    if (isServiceError(err) && err.code === 'QUOTA_EXCEEDED') await this.discard();
    throw err;
  }
}
