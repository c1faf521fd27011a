/**
 * Reading a repository's stored objects on the read path, without copying more than needed:
 * sizes and the first bytes of a blob come from LMDB's zero-copy view, and a blob streams out
 * chunk by chunk through one buffer per stream, so serving a 100 MiB file allocates 1 MiB.
 * Trees, commits and blob sizes are kept in a per-thread LRU (objects never change): the root
 * and the directories on a hot path are read from LMDB once, not on every request.
 */
import { ServiceError } from '../../errors.js';
import type { Storage } from '../database.js';
import { CHUNK_SIZE, CHUNKED_BLOB, DEFLATED_BLOB, ZLIB_BLOB, LmdbObjectStore, decodeChunkedHeader, decodeObjectValue, storedObjectSize } from '../git-object-store.js';
import { K } from '../keys.js';
import type { GitObject } from '../../vcs/object-store.js';
import { LruCache } from './lru-cache.js';

/**
 * lmdb-js's zero-copy read: a Buffer over a shared region whose `length` property is set to the
 * value's size while the typed array itself spans the whole region; `subarray` gives a view that
 * copies (`copy`, `set`) correctly.
 */
function fastView(view: Buffer | undefined): Buffer | undefined {
  return view && view.subarray(0, view.length);
}

const objectCache = new LruCache<GitObject>(20_000, 16 * 1024 * 1024, (object) => object.content.length + 96);
const sizeCache = new LruCache<number>(100_000, Infinity, () => 0);
/** Small blobs, the files agents read over and over: served without an LMDB read or a copy. */
const SMALL_BLOB_BYTES = 64 * 1024;
const smallBlobs = new LruCache<Uint8Array>(50_000, 64 * 1024 * 1024, (content) => content.length + 96);

export class ReadObjectStore extends LmdbObjectStore {
  constructor(
    private readonly db: Storage,
    repoId: string,
  ) {
    super(db, repoId);
  }

  override read(oid: string): GitObject | undefined {
    const cached = objectCache.get(oid, this.repoId);
    if (cached) return cached;
    const small = smallBlobs.get(oid, this.repoId);
    if (small) return { type: 'blob', content: small };
    const object = super.read(oid);
    if (object && (object.type === 'tree' || object.type === 'commit')) objectCache.set(oid, object, this.repoId);
    else if (object?.type === 'blob' && object.content.length <= SMALL_BLOB_BYTES) smallBlobs.set(oid, object.content, this.repoId);
    return object;
  }

  /** The value's bytes as a view that is valid only until the next LMDB read of this thread. */
  private view(oid: string): Buffer | undefined {
    return fastView(this.db.objects.getBinaryFast(K.object(this.repoId, oid)));
  }

  override size(oid: string): number | undefined {
    const cached = sizeCache.get(oid, this.repoId);
    if (cached !== undefined) return cached;
    const view = this.view(oid);
    if (!view) return undefined;
    const size = storedObjectSize(view);
    sizeCache.set(oid, size, this.repoId);
    return size;
  }

  /** The first `length` bytes of a blob (a copy), without reading the rest. */
  prefix(oid: string, length: number): Uint8Array {
    const view = this.view(oid);
    if (!view) throw new ServiceError('INTERNAL_ERROR', `missing blob ${oid}`);
    if (view[0] === ZLIB_BLOB || view[0] === DEFLATED_BLOB) return Buffer.from(decodeObjectValue(oid, view).content!.subarray(0, length));
    if (view[0] !== CHUNKED_BLOB) return Buffer.from(view.subarray(1, 1 + length));
    const header = decodeChunkedHeader(view);
    const first = fastView(this.db.chunks.getBinaryFast(K.chunk(this.repoId, header.u, 0)));
    if (!first) throw new ServiceError('INTERNAL_ERROR', `missing chunk 0 of blob ${oid}`);
    return Buffer.from(first.subarray(0, length));
  }
}

export interface BlobStream {
  size: number;
  /** Small blobs: the whole content, ready to send in one piece. */
  content: Uint8Array | null;
  /** Large blobs: the pieces in order (each valid until the next one is asked for). */
  chunks: AsyncIterable<Uint8Array> | null;
}

/**
 * Opens a blob for sending. A chunked blob is read one chunk at a time into a buffer owned by
 * this stream and reused for every chunk: the consumer (the responder) asks for the next piece
 * only after the previous one was handed to the socket, so nothing accumulates.
 */
export function openBlobStream(storage: Storage, repoId: string, oid: string): BlobStream | undefined {
  const small = smallBlobs.get(oid, repoId);
  if (small) return { size: small.length, content: small, chunks: null };
  const value = storage.objects.get(K.object(repoId, oid));
  if (!value) return undefined;
  const info = decodeObjectValue(oid, value);
  if (info.type !== 'blob') return undefined;
  if (info.chunked === null) {
    if (info.size <= SMALL_BLOB_BYTES) smallBlobs.set(oid, info.content, repoId);
    return { size: info.size, content: info.content, chunks: null };
  }
  const { u: uploadId, n, s: size } = info.chunked;
  return {
    size,
    content: null,
    chunks: {
      // Each read is synchronous; the stream is async only because its consumer waits between chunks.
      [Symbol.asyncIterator]() {
        const buffer = Buffer.allocUnsafe(Math.min(CHUNK_SIZE, size));
        let i = 0;
        return {
          next(): Promise<IteratorResult<Uint8Array>> {
            if (i === n) return Promise.resolve({ done: true, value: undefined });
            const view = fastView(storage.chunks.getBinaryFast(K.chunk(repoId, uploadId, i)));
            if (!view) return Promise.reject(new ServiceError('INTERNAL_ERROR', `missing chunk ${i} of blob ${oid}`));
            i++;
            // The view is only valid until the next read (another request may run while we wait).
            return Promise.resolve({ done: false, value: view.length <= buffer.length ? buffer.subarray(0, view.copy(buffer)) : Buffer.from(view) });
          },
        };
      },
    },
  };
}
