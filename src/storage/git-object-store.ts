import { deflateSync, inflateRawSync, inflateSync } from 'node:zlib';
import { ServiceError } from '../errors.js';
import { hashObject } from '../vcs/git-object.js';
import type { GitObject, ObjectStore, ObjectType } from '../vcs/object-store.js';
import { putIfAbsent, type Storage } from './database.js';
import { K } from './keys.js';

/**
 * The repository's git objects in LMDB (the `ObjectStore` of src/vcs). Objects are stored under
 * `[repoId, oid]` in the `objects` database and written with `putSync`, so inside an actor command
 * they commit atomically with the metadata that references them (one transaction, one flush).
 *
 * Value layout: one type byte, then the content — git's type numbers (1 commit, 2 tree, 3 blob,
 * 4 tag) for inline objects; `ZLIB_BLOB` for a blob stored compressed (its size as a 32-bit
 * little-endian number, then a zlib stream — exactly what a git pack entry carries, so upload-pack
 * sends it as stored; `DEFLATED_BLOB` is the same with a raw deflate stream, as written before
 * `ZLIB_BLOB` existed, and still read); `CHUNKED_BLOB` for a blob larger than
 * `CHUNK_SIZE`, whose value is a small JSON header `{u: uploadId, s: size, n: chunkCount}` and
 * whose bytes live in the `chunks` database under `[repoId, uploadId, index]` (1 MiB each) so
 * they stream in and out.
 */
export const CHUNK_SIZE = 1024 * 1024;
export const CHUNKED_BLOB = 0x83;
export const DEFLATED_BLOB = 0x13;
export const ZLIB_BLOB = 0x23;

/**
 * Blobs in this size range are stored deflated when that saves an eighth or more. A value over
 * about 2 KiB leaves an LMDB leaf for pages of its own, and every page a write dirties is one more
 * random write for the disk: a 2 KiB source file compressed fits in its leaf (an agent write of three
 * such files measured 14–16 % fewer pages). Larger blobs take pages of their own either way,
 * written side by side as one I/O, so compressing them would only add CPU to the write path.
 */
const DEFLATE_MIN_BYTES = 1024;
const DEFLATE_MAX_BYTES = 64 * 1024;

const TYPE_CODE: Record<ObjectType, number> = { commit: 1, tree: 2, blob: 3, tag: 4 };
const TYPE_NAME: Record<number, ObjectType> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag' };

export interface ChunkedBlobHeader {
  /** Upload id the chunks are stored under. */
  u: string;
  /** Size in bytes. */
  s: number;
  /** Number of chunks. */
  n: number;
}

/** What is known about a stored object without loading its content. */
export type ObjectInfo =
  | { type: ObjectType; size: number; chunked: null; content: Uint8Array }
  | { type: 'blob'; size: number; chunked: ChunkedBlobHeader; content: null };

export function encodeInlineObject(type: ObjectType, content: Uint8Array): Buffer {
  if (type === 'blob' && content.length >= DEFLATE_MIN_BYTES && content.length <= DEFLATE_MAX_BYTES) {
    const packed = deflateSync(content, { level: 1 });
    if (packed.length + 5 <= content.length - (content.length >> 3)) {
      const value = Buffer.allocUnsafe(packed.length + 5);
      value[0] = ZLIB_BLOB;
      value.writeUInt32LE(content.length, 1);
      value.set(packed, 5);
      return value;
    }
  }
  const value = Buffer.allocUnsafe(content.length + 1);
  value[0] = TYPE_CODE[type];
  value.set(content, 1);
  return value;
}

/** An object hashed and encoded for storage: the CPU work of a write, done before it is stored. */
export interface PreparedObject {
  oid: string;
  type: ObjectType;
  content: Uint8Array;
  value: Buffer;
}

/** Hashes and encodes an inline object (not for blobs over `CHUNK_SIZE`, which are stored in chunks). */
export function prepareObject(type: ObjectType, content: Uint8Array): PreparedObject {
  return { oid: hashObject(type, content), type, content, value: encodeInlineObject(type, content) };
}

export function encodeChunkedHeader(header: ChunkedBlobHeader): Buffer {
  return Buffer.concat([Buffer.from([CHUNKED_BLOB]), Buffer.from(JSON.stringify(header))]);
}

/** The header of a `CHUNKED_BLOB` value. */
export function decodeChunkedHeader(value: Buffer): ChunkedBlobHeader {
  return JSON.parse(value.toString('utf8', 1)) as ChunkedBlobHeader;
}

export function decodeObjectValue(oid: string, value: Buffer): ObjectInfo {
  const code = value[0]!;
  if (code === CHUNKED_BLOB) {
    const header = decodeChunkedHeader(value);
    return { type: 'blob', size: header.s, chunked: header, content: null };
  }
  if (code === ZLIB_BLOB) return { type: 'blob', size: value.readUInt32LE(1), chunked: null, content: inflateSync(value.subarray(5)) };
  if (code === DEFLATED_BLOB) return { type: 'blob', size: value.readUInt32LE(1), chunked: null, content: inflateRawSync(value.subarray(5)) };
  const type = TYPE_NAME[code];
  if (!type) throw new ServiceError('INTERNAL_ERROR', `object ${oid} has an unknown type code ${code}`);
  return { type, size: value.length - 1, chunked: null, content: value.subarray(1) };
}

/** The type of a stored object from its value, without decoding the content. */
export function storedObjectType(oid: string, value: Buffer): ObjectType {
  const code = value[0]!;
  if (code === CHUNKED_BLOB || code === ZLIB_BLOB || code === DEFLATED_BLOB) return 'blob';
  const type = TYPE_NAME[code];
  if (!type) throw new ServiceError('INTERNAL_ERROR', `object ${oid} has an unknown type code ${code}`);
  return type;
}

/** The size of a stored object from its value, without decoding the content. */
export function storedObjectSize(value: Buffer): number {
  const code = value[0]!;
  if (code === CHUNKED_BLOB) return decodeChunkedHeader(value).s;
  if (code === ZLIB_BLOB || code === DEFLATED_BLOB) return value.readUInt32LE(1);
  return value.length - 1;
}

/** An object's stored value (its encoding, see above), or undefined when the repository lacks it. */
export function storedObjectValue(storage: Storage, repoId: string, oid: string): Buffer | undefined {
  return storage.objects.get(K.object(repoId, oid));
}

/** Whether the repository stores the object (a key lookup; nothing is read). */
export function isObjectStored(storage: Storage, repoId: string, oid: string): boolean {
  return storage.objects.doesExist(K.object(repoId, oid));
}

/** Writes `content` as chunks under `uploadId` (synchronously, in the caller's transaction). */
export function putChunksSync(storage: Storage, repoId: string, uploadId: string, content: Uint8Array): number {
  let index = 0;
  for (let pos = 0; pos < content.length; pos += CHUNK_SIZE, index++) {
    storage.chunks.putSync(K.chunk(repoId, uploadId, index), Buffer.from(content.subarray(pos, pos + CHUNK_SIZE)));
  }
  return index;
}

/** Reads one chunk (a copy); missing chunks are corruption. */
export function readChunk(storage: Storage, repoId: string, uploadId: string, index: number): Buffer {
  const chunk = storage.chunks.get(K.chunk(repoId, uploadId, index));
  if (!chunk) throw new ServiceError('INTERNAL_ERROR', `missing chunk ${index} of upload ${uploadId}`);
  return chunk;
}

/**
 * Told about every write of a persistent store, so that what storing costs (the org quota) and
 * what it means (an upload, a fetch, a reference: pending-objects.ts) are decided by the writer.
 */
export interface ObjectWriteObserver {
  /** `oid` was new to the repository and is now stored: `size` bytes of content. */
  stored(oid: string, size: number): void;
  /** `oid` was already stored; the write refers to it again. */
  existing(oid: string): void;
}

/** Objects up to this size are remembered by a store instance once read or written. */
const CACHED_OBJECT_BYTES = 64 * 1024;

export class LmdbObjectStore implements ObjectStore {
  /** Objects written by a scratch store (never persisted), by oid. */
  private readonly overlay: Map<string, GitObject> | null;
  /**
   * Small objects this instance has read or written. Objects never change, so the cache is always
   * right; an instance lives for one command or one read, which bounds it (a write path reads
   * the same trees several times: path lookups, edits, merges).
   */
  private readonly cache = new Map<string, ObjectInfo>();
  private readonly observer: ObjectWriteObserver | null;

  /**
   * `scratch`: writes stay in memory. Readers outside an actor use it for computations that
   * write derived objects (a conflict's materialized view) without touching the database.
   * `observer`: told whether each persistent write stored a new object or met an existing one.
   */
  constructor(
    private readonly storage: Storage,
    readonly repoId: string,
    options: { scratch?: boolean; observer?: ObjectWriteObserver } = {},
  ) {
    this.overlay = options.scratch ? new Map() : null;
    this.observer = options.observer ?? null;
  }

  info(oid: string): ObjectInfo | undefined {
    const cached = this.cache.get(oid);
    if (cached) return cached;
    const value = this.storage.objects.get(K.object(this.repoId, oid));
    if (value) {
      const info = decodeObjectValue(oid, value);
      if (info.chunked === null && info.size <= CACHED_OBJECT_BYTES) this.cache.set(oid, info);
      return info;
    }
    const own = this.overlay?.get(oid);
    return own && { type: own.type, size: own.content.length, chunked: null, content: own.content };
  }

  read(oid: string): GitObject | undefined {
    const info = this.info(oid);
    if (!info) return undefined;
    if (info.chunked === null) return { type: info.type, content: info.content };
    // Only callers that asked for a whole blob get here (merges check `size` first).
    const parts: Buffer[] = [];
    for (let i = 0; i < info.chunked.n; i++) parts.push(readChunk(this.storage, this.repoId, info.chunked.u, i));
    return { type: 'blob', content: Buffer.concat(parts, info.size) };
  }

  size(oid: string): number | undefined {
    return this.info(oid)?.size;
  }

  has(oid: string): boolean {
    return this.cache.has(oid) || this.storage.objects.doesExist(K.object(this.repoId, oid)) || (this.overlay?.has(oid) ?? false);
  }

  write(type: ObjectType, content: Uint8Array): string {
    const oid = hashObject(type, content);
    if (this.overlay) return this.writeScratch(oid, type, content);
    // A blob is looked up first: encoding one costs more than a lookup, and a large one's chunks
    // go in before its header. Other objects (trees, commits, tags) are small and nearly always new.
    if (type === 'blob' ? this.known(oid) : this.met(oid)) return oid;
    if (type === 'blob' && content.length > CHUNK_SIZE) {
      const uploadId = `obj_${oid}`;
      const n = putChunksSync(this.storage, this.repoId, uploadId, content);
      this.storage.objects.putSync(K.object(this.repoId, oid), encodeChunkedHeader({ u: uploadId, s: content.length, n }));
      this.observer?.stored(oid, content.length);
      return oid;
    }
    return this.store(oid, type, content, encodeInlineObject(type, content));
  }

  /** Stores an object hashed and encoded earlier, outside the write lock (`prepareObject`). */
  writePrepared(object: PreparedObject): string {
    if (this.overlay) return this.writeScratch(object.oid, object.type, object.content);
    if (this.met(object.oid)) return object.oid;
    return this.store(object.oid, object.type, object.content, object.value);
  }

  /**
   * Stores an object given as its stored value alone, encoded by the front end (ActorRequest.blobs,
   * `prepareObject` there): its size is read from the value, its content is not decoded. Only a
   * command's store takes one, never a scratch store.
   */
  writeEncoded(oid: string, value: Buffer): string {
    if (this.overlay) throw new Error('a scratch store takes contents, not stored values');
    if (!this.met(oid) && this.putNew(oid, value)) this.observer?.stored(oid, storedObjectSize(value));
    return oid;
  }

  private store(oid: string, type: ObjectType, content: Uint8Array, value: Buffer): string {
    if (!this.putNew(oid, value)) return oid;
    if (content.length <= CACHED_OBJECT_BYTES) this.cache.set(oid, { type, size: content.length, chunked: null, content: Uint8Array.from(content) });
    this.observer?.stored(oid, content.length);
    return oid;
  }

  /**
   * Puts `value` unless the repository already stores `oid`, in one call into lmdb-js (a lookup
   * from here, then a put, took two, each encoding the key); an object met is reported as by
   * `known`.
   */
  private putNew(oid: string, value: Buffer): boolean {
    if (putIfAbsent(this.storage.objects, K.object(this.repoId, oid), value)) return true;
    this.observer?.existing(oid);
    return false;
  }

  /** `known` for an object this instance has read or written: no lookup. */
  private met(oid: string): boolean {
    if (!this.cache.has(oid)) return false;
    this.observer?.existing(oid);
    return true;
  }

  private writeScratch(oid: string, type: ObjectType, content: Uint8Array): string {
    if (!this.has(oid)) this.overlay!.set(oid, { type, content: Uint8Array.from(content) });
    return oid;
  }

  /**
   * Checked before writing: the quota counts an object once, when it is first stored, and a
   * write that meets a stored object references it (which a pending mark must learn).
   */
  private known(oid: string): boolean {
    if (!this.has(oid)) return false;
    this.observer?.existing(oid);
    return true;
  }
}
