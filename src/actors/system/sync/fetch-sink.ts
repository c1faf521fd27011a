/**
 * Where a pull's pack goes as it is read (the `PackSink` of pack-reader.ts). Objects are stored
 * in short transactions (other writers wait on the same lock) of at most `BATCH_OBJECTS` objects
 * or `BATCH_BYTES` bytes, each batch charged to the org's quota; blobs over 1 MiB are staged in
 * chunks as they arrive (blob-store.ts) and committed by the next batch. A batch that does not
 * fit the quota fails the sync, and everything the sync stored is taken back, so a refused pull
 * keeps nothing.
 *
 * Delta bases are read back from the current batch, the staged blobs, or the database (a large
 * base chunk by chunk). The connectivity check keeps only the oids that received objects name
 * and that are neither stored nor received yet; a pack never needs more of them than it may
 * hold objects, which bounds that set.
 */
import { COMMIT_THEN_SYNC, type Storage } from '../../../storage/database.js';
import { isServiceError, type ServiceError } from '../../../errors.js';
import { BlobStager, commitStagedBlob, discardUpload, forgetStaging, type StagedBlob } from '../../../storage/blob-store.js';
import { discardFetched } from '../../../storage/blob-collect.js';
import { objectStore } from '../../../storage/change-store.js';
import { CHUNK_SIZE, decodeObjectValue, encodeInlineObject, readChunk, type PreparedObject } from '../../../storage/git-object-store.js';
import { K } from '../../../storage/keys.js';
import { ObjectAccounting } from '../../../storage/object-accounting.js';
import { pendingOf } from '../../../storage/pending-objects.js';
import { assertRoom } from '../../../storage/quota.js';
import type { RepoRecord } from '../../../storage/records.js';
import { parseCommit, parseTree } from '../../../vcs/git-object.js';
import type { ObjectType } from '../../../vcs/object-store.js';
import type { LargeBlobWriter, PackBase, PackObject, PackSink } from './pack-reader.js';
import { GitProtocolError, SyncFailure } from './sync-errors.js';

const BATCH_OBJECTS = 2000;
const BATCH_BYTES = 8 * 1024 * 1024;

/** Where a fetch stores: the sync it belongs to and the org quota it is charged against. */
export interface FetchTarget {
  repoId: string;
  syncId: string;
  quotaBytes: number;
}

const OID = /^[0-9a-f]{40}$/;

/** The oids an object refers to that must exist for it to be usable (gitlinks excepted). */
function referencesOf(object: PackObject): string[] {
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
      const m = /^object ([0-9a-f]{40})\n/.exec(object.content.toString('latin1', 0, 48));
      if (m) return [m[1]!];
    } else return [];
  } catch {
    // The parser's message may quote the object; ours below does not.
  }
  throw new GitProtocolError(`the upstream sent a malformed ${object.type} object`);
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

export class FetchSink implements PackSink {
  private readonly accounting: ObjectAccounting;
  private readonly orgId: string;
  private batch = new Map<string, PreparedObject>();
  private staged = new Map<string, StagedBlob>();
  private bytes = 0;
  /** Oids named by received objects, neither stored nor received yet. */
  private readonly expected = new Set<string>();

  constructor(
    private readonly storage: Storage,
    private readonly target: FetchTarget,
    private readonly maxExpected: number,
  ) {
    const repo = storage.meta.get(K.repo(target.repoId)) as RepoRecord | undefined;
    if (!repo) throw new SyncFailure('the repository was deleted during the sync', false);
    this.orgId = repo.org_id;
    this.accounting = new ObjectAccounting(storage.meta, target.repoId, { kind: 'fetch', syncId: target.syncId }, Date.now());
  }

  private stored(oid: string): boolean {
    return this.storage.objects.doesExist(K.object(this.target.repoId, oid));
  }

  private has(oid: string): boolean {
    return this.batch.has(oid) || this.staged.has(oid) || this.stored(oid);
  }

  private received(oid: string, references: readonly string[]): void {
    this.expected.delete(oid);
    for (const ref of references) if (!this.has(ref)) this.expected.add(ref);
    if (this.expected.size > this.maxExpected) throw new GitProtocolError('the upstream sent a pack naming more missing objects than a pack may hold');
  }

  async object(object: PackObject): Promise<void> {
    this.received(object.oid, referencesOf(object));
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
          try {
            assertRoom(this.storage.meta, this.orgId, this.target.quotaBytes, size);
          } catch (err) {
            await this.refuse(err);
          }
          stager = new BlobStager(this.storage, this.target.repoId, size);
        }
        await stager.append(bytes);
      },
      finish: async (oid) => {
        const staged = await stager!.finish();
        if (staged.oid !== oid) throw new GitProtocolError('a large object changed while it was stored');
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
    const value = this.storage.objects.get(K.object(this.target.repoId, oid));
    if (!value) return undefined;
    const info = decodeObjectValue(oid, value);
    return info.chunked ? chunkedBase(this.storage, this.target.repoId, info.chunked.u, info.size) : memoryBase(info.type, info.content);
  }

  /** Stores the last batch and checks that every object a received one names is there. */
  async finish(): Promise<void> {
    await this.flush();
    let missing = 0;
    for (const oid of this.expected) if (!this.stored(oid)) missing++;
    if (missing > 0) throw new GitProtocolError(`the upstream sent an incomplete pack (${missing} objects its objects name are missing)`);
  }

  /** The pull failed: staged blobs that no batch committed are dropped at once. */
  async abandon(): Promise<void> {
    for (const staged of this.staged.values()) await discardUpload(this.storage, this.target.repoId, staged.upload_id);
    this.staged.clear();
    this.batch.clear();
  }

  private async flush(): Promise<void> {
    if (this.batch.size === 0 && this.staged.size === 0) return;
    const { storage } = this;
    const { repoId } = this.target;
    const objects = [...this.batch.values()];
    const staged = [...this.staged.values()];
    // A store per batch: its cache of small objects lives as long as the batch.
    const store = objectStore(storage, repoId, { observer: this.accounting });
    try {
      storage.root.transactionSync(() => {
        // Checked in the same transaction: objects are never written under a deleted repository.
        const repo = storage.meta.get(K.repo(repoId)) as RepoRecord | undefined;
        if (!repo) throw new SyncFailure('the repository was deleted during the sync', false);
        for (const object of objects) store.writePrepared(object);
        for (const blob of staged) commitStagedBlob(storage, repoId, blob, this.accounting);
        this.accounting.settle(repo.org_id, this.target.quotaBytes);
        // A batch is megabytes: its sync runs after the write lock is released.
      }, COMMIT_THEN_SYNC);
    } catch (err) {
      await this.refuse(err);
    }
    for (const blob of staged) forgetStaging(blob.upload_id);
    this.batch.clear();
    this.staged.clear();
    this.bytes = 0;
    // Let other syncs of this worker make progress between batches.
    await new Promise((resolve) => setImmediate(resolve));
  }

  /** A quota refusal takes back everything this sync stored, then fails it; other errors pass. */
  private async refuse(err: unknown): Promise<never> {
    if (!isServiceError(err) || err.code !== 'QUOTA_EXCEEDED') throw err;
    await this.abandon();
    const { repoId, syncId } = this.target;
    const mine: string[] = [];
    for (const { oid, mark } of pendingOf(this.storage.meta, repoId)) if (mark.sync === syncId) mine.push(oid);
    discardFetched(this.storage, repoId, syncId, mine);
    throw new SyncFailure(`QUOTA_EXCEEDED: ${(err as ServiceError).message}`, false);
  }
}
