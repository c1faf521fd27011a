import { createHash, type Hash } from 'node:crypto';
import { ServiceError, storageUnavailable } from '../errors.js';
import { log } from '../log.js';
import type { Storage } from './database.js';
import { newId } from './ids.js';
import { K, Ranges } from './keys.js';
import { removeRange } from './write-recorder.js';
import { CHUNK_SIZE, encodeChunkedHeader, encodeInlineObject, readChunk, type ObjectWriteObserver } from './git-object-store.js';

/**
 * Large blobs: streamed into the `chunks` database before the mutation that uses them and
 * committed by that mutation, so a 512 MiB file is never one buffer or one string. (Reading them
 * out chunk by chunk is `read/repo-objects.ts`.)
 *
 * Staging happens on the front end while the body arrives (`BlobStager`, async LMDB writes with
 * at most a few chunks in flight). Committing is the actor's (`commitStagedBlob`, synchronous, in
 * the command's transaction): it writes the object header that makes the chunks part of the
 * repository. LMDB commits are ordered, so once the command's transaction is on disk the chunks
 * it references are too.
 *
 * The git oid hashes `blob <size>\0` before the content. When the size is declared up front (a
 * raw upload with Content-Length) the stager hashes as the bytes arrive; otherwise (base64 inside
 * JSON, chunked uploads) it hashes in a second pass over the stored chunks once the size is known
 * — reading LMDB pages back is much cheaper than holding the content.
 */
export interface StagedBlob {
  upload_id: string;
  oid: string;
  size: number;
  chunks: number;
}

/** Chunk writes allowed in flight before `append` waits (bounds memory to a few MiB). */
const MAX_IN_FLIGHT = 4;

/**
 * An asynchronous LMDB write whose failure (disk full) is the client's 503, not a 500. Handled
 * from the start: a write may fail while the request is still waiting on an earlier one, and an
 * unhandled rejection there would only be noise in the log.
 */
function staged(write: Promise<boolean>): Promise<void> {
  const outcome = write.then(
    () => undefined,
    (err: unknown) => {
      log.error('staging write failed', { err });
      throw storageUnavailable();
    },
  );
  outcome.catch(() => undefined);
  return outcome;
}

/** Upload id → its repository and when its stager last received bytes (ms), for uploads this process is staging. */
const activity = new Map<string, { repoId: string; at: number }>();

/**
 * When this process last saw bytes of `uploadId` (undefined when it is not staging it). Entries
 * of uploads that committed are dropped by `forgetStaging`, which the collector calls.
 */
export function lastStagingActivity(uploadId: string): number | undefined {
  return activity.get(uploadId)?.at;
}

/** Whether an upload is still announced as staging (its blob neither committed nor discarded). */
export function isUploadStaged(storage: Storage, repoId: string, uploadId: string): boolean {
  return storage.meta.doesExist(K.stagedUpload(repoId, uploadId));
}

export function forgetStaging(uploadId: string): void {
  activity.delete(uploadId);
}

/** Uploads this process has staged and not discarded (committed ones included until forgotten). */
export function* stagingUploads(): Generator<{ uploadId: string; repoId: string }> {
  for (const [uploadId, { repoId }] of activity) yield { uploadId, repoId };
}

export class BlobStager {
  readonly uploadId = newId('upl');
  private current: Buffer = Buffer.allocUnsafe(CHUNK_SIZE);
  private fill = 0;
  private chunkCount = 0;
  private total = 0;
  private readonly inFlight: Promise<void>[] = [];
  private readonly hash: Hash | null;
  private readonly announced: Promise<void>;
  private discarded = false;

  /** `declaredSize`: hash while streaming; the bytes must then add up to exactly this size. */
  constructor(
    private readonly storage: Storage,
    private readonly repoId: string,
    private readonly declaredSize: number | null = null,
  ) {
    this.hash = declaredSize === null ? null : createHash('sha1').update(`blob ${declaredSize}\0`);
    // Queued before any chunk: lmdb-js commits asynchronous writes in order, so no chunk is ever
    // on disk without the entry that lets the collector find it.
    this.announced = staged(storage.meta.put(K.stagedUpload(repoId, this.uploadId), repoId));
    activity.set(this.uploadId, { repoId: this.repoId, at: Date.now() });
  }

  get size(): number {
    return this.total;
  }

  async append(bytes: Uint8Array): Promise<void> {
    activity.set(this.uploadId, { repoId: this.repoId, at: Date.now() });
    let pos = 0;
    this.hash?.update(bytes);
    this.total += bytes.length;
    while (pos < bytes.length) {
      const n = Math.min(CHUNK_SIZE - this.fill, bytes.length - pos);
      this.current.set(bytes.subarray(pos, pos + n), this.fill);
      this.fill += n;
      pos += n;
      if (this.fill === CHUNK_SIZE) await this.flushChunk();
    }
  }

  private async flushChunk(): Promise<void> {
    const chunk = this.fill === CHUNK_SIZE ? this.current : Buffer.from(this.current.subarray(0, this.fill));
    this.inFlight.push(staged(this.storage.chunks.put(K.chunk(this.repoId, this.uploadId, this.chunkCount++), chunk)));
    this.current = Buffer.allocUnsafe(CHUNK_SIZE);
    this.fill = 0;
    if (this.inFlight.length >= MAX_IN_FLIGHT) await this.inFlight.shift();
  }

  /** Writes out what is buffered and waits for every chunk to commit; returns the chunk count. */
  async flush(): Promise<number> {
    if (this.fill > 0) await this.flushChunk();
    await Promise.all([this.announced, ...this.inFlight.splice(0)]);
    return this.chunkCount;
  }

  async finish(): Promise<StagedBlob> {
    await this.flush();
    let oid: string;
    if (this.hash) {
      if (this.total !== this.declaredSize) throw new ServiceError('INVALID_REQUEST', `the body has ${this.total} bytes, not the declared ${this.declaredSize}`);
      oid = this.hash.digest('hex');
    } else {
      oid = await hashStoredBlob(this.storage, this.repoId, this.uploadId, this.chunkCount, this.total);
    }
    activity.set(this.uploadId, { repoId: this.repoId, at: Date.now() });
    return { upload_id: this.uploadId, oid, size: this.total, chunks: this.chunkCount };
  }

  /** Drops whatever was staged (a failed request). */
  async discard(): Promise<void> {
    if (this.discarded) return;
    this.discarded = true;
    activity.delete(this.uploadId);
    await Promise.allSettled([this.announced, ...this.inFlight.splice(0)]);
    // When even the removal cannot be written (disk full), the staged upload stays announced and
    // the collector removes it later.
    await discardUpload(this.storage, this.repoId, this.uploadId).catch((err: unknown) => log.warn('staged upload not discarded', { upload_id: this.uploadId, err }));
  }
}

/** The git blob oid of staged chunks, yielding to the event loop between chunks. */
async function hashStoredBlob(storage: Storage, repoId: string, uploadId: string, chunks: number, size: number): Promise<string> {
  const hash = createHash('sha1').update(`blob ${size}\0`);
  for (let i = 0; i < chunks; i++) {
    // A copy, not getBinaryFast's zero-copy view: that view reports the value's length but spans
    // lmdb-js's whole shared read buffer, which native consumers such as `hash.update` read.
    hash.update(readChunk(storage, repoId, uploadId, i));
    if (i % 16 === 15) await new Promise((r) => setImmediate(r));
  }
  return hash.digest('hex');
}

/** Deletes every chunk staged under an upload id and its announcement (async; for the front end). */
export async function discardUpload(storage: Storage, repoId: string, uploadId: string): Promise<void> {
  const removals: Promise<boolean>[] = [];
  for (const key of storage.chunks.getKeys(Ranges.uploadChunks(repoId, uploadId))) removals.push(storage.chunks.remove(key));
  removals.push(storage.meta.remove(K.stagedUpload(repoId, uploadId)));
  await Promise.all(removals);
}

/** The same inside the caller's transaction (a commit that needs no staged copy, the collector). */
export function removeUploadSync(storage: Storage, repoId: string, uploadId: string): void {
  // Keys are collected first: a cursor is not walked while its range is being deleted.
  for (const key of [...storage.chunks.getKeys(Ranges.uploadChunks(repoId, uploadId))]) storage.chunks.removeSync(key);
  storage.meta.removeSync(K.stagedUpload(repoId, uploadId));
}

/**
 * Makes a staged blob an object of the repository, inside the caller's transaction: a blob the
 * repository already has drops the staged copy; one that fits in a chunk is stored inline. The
 * observer learns which of the two happened (quota and pending marks, object-accounting.ts).
 */
export function commitStagedBlob(storage: Storage, repoId: string, staged: StagedBlob, observer: ObjectWriteObserver): void {
  const key = K.object(repoId, staged.oid);
  if (storage.objects.doesExist(key)) {
    removeUploadSync(storage, repoId, staged.upload_id);
    observer.existing(staged.oid);
    return;
  }
  const expected = Math.ceil(staged.size / CHUNK_SIZE);
  if (staged.chunks !== expected || (expected > 0 && !storage.chunks.doesExist(K.chunk(repoId, staged.upload_id, expected - 1)))) {
    throw new ServiceError('INTERNAL_ERROR', `staged upload ${staged.upload_id} is incomplete`);
  }
  if (staged.size <= CHUNK_SIZE) {
    const content = expected === 0 ? Buffer.alloc(0) : readChunk(storage, repoId, staged.upload_id, 0);
    storage.objects.putSync(key, encodeInlineObject('blob', content));
    removeUploadSync(storage, repoId, staged.upload_id);
  } else {
    storage.objects.putSync(key, encodeChunkedHeader({ u: staged.upload_id, s: staged.size, n: staged.chunks }));
    storage.meta.removeSync(K.stagedUpload(repoId, staged.upload_id));
  }
  observer.stored(staged.oid, staged.size);
}

/** Removes every chunk of a repository (its deletion; objects are removed by the repo command). */
export function removeRepositoryChunks(storage: Storage, repoId: string): void {
  removeRange(storage, 'chunks', Ranges.chunks(repoId));
}
