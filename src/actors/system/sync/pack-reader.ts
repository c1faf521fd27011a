/**
 * Reading a git packfile (gitformat-pack, versions 2 and 3) as a stream, in one pass, with memory
 * bounded whatever the pack's size: the pulls of upstream sync use it, and so can anything else
 * that receives a pack (a push). The receiver is a `PackSink`: it gets every object in pack order,
 * hashed here (the oid is computed from the content, never taken from the pack), and it must be
 * able to give back as a delta base any object it was given earlier or already holds.
 *
 * What is in memory at a time:
 * - the chunk of the stream being read (a network read, up to 64 KiB as side-band delivers it);
 * - one object: whole when it is a blob of at most `WHOLE_BLOB_BYTES` or a commit, tree or tag
 *   (at most `WHOLE_OBJECT_BYTES`); a larger blob streams to the sink in 64 KiB pieces, whether
 *   it is stored whole or as a delta, and a delta streams its instructions as they inflate;
 * - a delta's base as the sink gives it back (a large one is read back in chunks);
 * - deltas whose base comes later in the pack, up to `DEFERRED_DELTA_BYTES` (git writes bases
 *   first, so these are rare);
 * - per object, its offset and oid (29 bytes), to find OFS_DELTA bases.
 * A declared size (an entry's, or a delta's result size) is checked against the limits and then
 * only compared with what actually inflates: it never sizes an allocation.
 *
 * Objects reach the sink before the trailer is checked (that is what streaming means): a sink
 * that must not keep anything of a bad pack keeps what it got aside until `readPack` resolves.
 */
import { createHash, type Hash } from 'node:crypto';
import { hashObject } from '../../../vcs/git-object.js';
import type { ObjectType } from '../../../vcs/object-store.js';
import { PackError } from './pack-error.js';
import { DeltaApplier, type BaseBytes, type DeltaTarget } from './pack-delta.js';
import { inflateEntry } from './pack-inflate.js';
import { PackInput } from './pack-input.js';

export { PackError } from './pack-error.js';

/** Blobs up to this size reach the sink whole; larger ones stream (`PackSink.largeBlob`). */
export const WHOLE_BLOB_BYTES = 1024 * 1024;
/** Commits, trees and tags are parsed whole, so each is held whole: at most this size. */
export const WHOLE_OBJECT_BYTES = 32 * 1024 * 1024;
/** Deltas waiting for a base later in the pack, in inflated bytes (plus 128 per delta). */
const DEFERRED_DELTA_BYTES = 16 * 1024 * 1024;

export interface PackObject {
  oid: string;
  type: ObjectType;
  content: Buffer;
}

export interface PackLimits {
  /** Bytes of the whole pack, trailer included. */
  maxPackBytes: number;
  maxObjects: number;
  /** Largest object, inflated. */
  maxObjectBytes: number;
}

/** An object as a delta base: its type and random access to its bytes. */
export interface PackBase extends BaseBytes {
  readonly type: ObjectType;
}

export interface LargeBlobWriter {
  write(bytes: Uint8Array): Promise<void>;
  /** Every byte was written; they hash to `oid`. */
  finish(oid: string): Promise<void>;
  /** The pack failed before the blob was complete. */
  abort(): Promise<void>;
}

export interface PackSink {
  /** An object held whole: a blob of at most `WHOLE_BLOB_BYTES`, or any commit, tree or tag. */
  object(object: PackObject): void | Promise<void>;
  /** A larger blob of `size` bytes, which arrive in order. */
  largeBlob(size: number): LargeBlobWriter;
  /** An object given earlier or already held by the receiver, or undefined. */
  base(oid: string): PackBase | undefined;
}

const TYPE_BY_CODE: Record<number, ObjectType> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag' };
const OFS_DELTA = 6;
const REF_DELTA = 7;

/** Where an object being produced goes: collected whole, or streamed to a large-blob writer. */
interface Output extends DeltaTarget {
  /** Hands the finished object to the sink; returns its oid. */
  finish(): Promise<string>;
  abort(): Promise<void>;
}

/** A delta whose base is not known yet, keyed by the base's oid (REF) or entry index (OFS). */
interface Deferred {
  entry: number;
  delta: Buffer;
}

/** Offsets and oids of the pack's entries, in pack order (so offsets ascend). */
class EntryIndex {
  private offsets = new Float64Array(1024);
  private oids = Buffer.alloc(1024 * 20);
  private resolved = new Uint8Array(1024);
  count = 0;

  add(offset: number): number {
    if (this.count === this.offsets.length) {
      const grow = <T extends Float64Array | Uint8Array>(old: T, make: (n: number) => T): T => {
        const next = make(old.length * 2);
        next.set(old);
        return next;
      };
      this.offsets = grow(this.offsets, (n) => new Float64Array(n));
      this.resolved = grow(this.resolved, (n) => new Uint8Array(n));
      const oids = Buffer.alloc(this.oids.length * 2);
      this.oids.copy(oids);
      this.oids = oids;
    }
    this.offsets[this.count] = offset;
    return this.count++;
  }

  resolve(entry: number, oid: string): void {
    this.oids.write(oid, entry * 20, 20, 'hex');
    this.resolved[entry] = 1;
  }

  /** The oid of a resolved entry, else undefined. */
  oid(entry: number): string | undefined {
    return this.resolved[entry] ? this.oids.toString('hex', entry * 20, entry * 20 + 20) : undefined;
  }

  /** The entry starting at `offset`, or -1. */
  at(offset: number): number {
    let lo = 0;
    let hi = this.count - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const value = this.offsets[mid]!;
      if (value === offset) return mid;
      if (value < offset) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

/** One delta being applied: its output opens once the delta states the result's size. */
class DeltaResult {
  readonly applier: DeltaApplier;
  private output: Output | null = null;

  constructor(base: PackBase, open: (targetSize: number) => Output) {
    this.applier = new DeltaApplier(base, (targetSize) => (this.output = open(targetSize)));
  }

  async finish(): Promise<string> {
    try {
      this.applier.finish();
    } catch (err) {
      await this.abort();
      throw err;
    }
    return this.output!.finish();
  }

  async abort(): Promise<void> {
    await this.output?.abort();
  }
}

class PackReader {
  private readonly index = new EntryIndex();
  private readonly waiting = new Map<string, Deferred[]>();
  private deferredBytes = 0;
  private deferredCount = 0;

  constructor(
    private readonly input: PackInput,
    private readonly sink: PackSink,
    private readonly limits: PackLimits,
  ) {}

  async read(): Promise<number> {
    const header = await this.input.bytes(12);
    if (header.toString('latin1', 0, 4) !== 'PACK') throw new PackError('the data is not a packfile');
    const version = header.readUInt32BE(4);
    if (version !== 2 && version !== 3) throw new PackError(`packfile version ${version} is not supported`);
    const count = header.readUInt32BE(8);
    if (count > this.limits.maxObjects) throw new PackError(`the pack has ${count} objects, over the limit of ${this.limits.maxObjects}`);
    for (let i = 0; i < count; i++) await this.entry();
    const checksum = this.input.digest();
    if (!checksum.equals(await this.input.bytes(20))) throw new PackError('the pack checksum does not match its content');
    if (!(await this.input.atEnd())) throw new PackError('data follows the pack checksum');
    if (this.deferredCount > 0) throw new PackError(`${this.deferredCount} deltas have a base that is neither in the pack nor already held`);
    return count;
  }

  private async entry(): Promise<void> {
    const offset = this.input.offset;
    let byte = await this.input.byte();
    const code = (byte >> 4) & 7;
    let size = byte & 0x0f;
    for (let shift = 4; byte & 0x80; shift += 7) {
      if (shift > 53) throw new PackError('an entry header is malformed');
      byte = await this.input.byte();
      size += (byte & 0x7f) * 2 ** shift;
    }
    const entry = this.index.add(offset);
    if (code === OFS_DELTA || code === REF_DELTA) return this.delta(entry, code, offset, size);
    const type = TYPE_BY_CODE[code];
    if (!type) throw new PackError(`an entry has the unknown type ${code}`);
    const output = this.output(type, size);
    try {
      await inflateEntry(this.input, size, WHOLE_BLOB_BYTES, (chunk) => output.write(chunk));
    } catch (err) {
      await output.abort();
      throw err;
    }
    await this.resolved(entry, await output.finish());
  }

  private async delta(entry: number, code: number, offset: number, size: number): Promise<void> {
    let key: string;
    if (code === OFS_DELTA) {
      let byte = await this.input.byte();
      let distance = byte & 0x7f;
      while (byte & 0x80) {
        if (distance > 2 ** 45) throw new PackError('a delta base offset is malformed');
        byte = await this.input.byte();
        distance = (distance + 1) * 128 + (byte & 0x7f);
      }
      const baseEntry = this.index.at(offset - distance);
      if (distance === 0 || baseEntry < 0) throw new PackError('a delta names a base offset where no entry starts');
      key = this.index.oid(baseEntry) ?? `#${baseEntry}`;
    } else {
      key = (await this.input.bytes(20)).toString('hex');
    }
    const base = key.startsWith('#') ? undefined : this.sink.base(key);
    if (base) {
      const result = this.deltaResult(base);
      try {
        await inflateEntry(this.input, size, WHOLE_BLOB_BYTES, (chunk) => result.applier.push(chunk));
      } catch (err) {
        await result.abort();
        throw err;
      }
      await this.resolved(entry, await result.finish());
      return;
    }
    // The base comes later in the pack (or nowhere): keep the instructions until it arrives.
    if (size > DEFERRED_DELTA_BYTES - this.deferredBytes) throw new PackError(`deltas whose base comes later in the pack exceed ${DEFERRED_DELTA_BYTES} bytes`);
    const parts: Buffer[] = [];
    await inflateEntry(this.input, size, DEFERRED_DELTA_BYTES, (chunk) => void parts.push(chunk));
    this.deferredBytes += size + 128;
    this.deferredCount++;
    const deferred = { entry, delta: Buffer.concat(parts) };
    const list = this.waiting.get(key);
    if (list) list.push(deferred);
    else this.waiting.set(key, [deferred]);
  }

  private deltaResult(base: PackBase): DeltaResult {
    return new DeltaResult(base, (targetSize) => this.output(base.type, targetSize));
  }

  /** Records an entry's oid and resolves the deltas that were waiting for it, in turn. */
  private async resolved(entry: number, oid: string): Promise<void> {
    const queue: Array<[number, string]> = [[entry, oid]];
    while (queue.length > 0) {
      const [done, doneOid] = queue.shift()!;
      this.index.resolve(done, doneOid);
      const ready = [...(this.waiting.get(doneOid) ?? []), ...(this.waiting.get(`#${done}`) ?? [])];
      this.waiting.delete(doneOid);
      this.waiting.delete(`#${done}`);
      if (ready.length === 0) continue;
      const base = this.sink.base(doneOid);
      if (!base) throw new PackError('a delta base given to the receiver cannot be read back');
      for (const d of ready) {
        this.deferredBytes -= d.delta.length + 128;
        this.deferredCount--;
        const result = this.deltaResult(base);
        try {
          await result.applier.push(d.delta);
        } catch (err) {
          await result.abort();
          throw err;
        }
        queue.push([d.entry, await result.finish()]);
      }
    }
  }

  /** Where an object of `type` and declared `size` is produced, after checking the limits. */
  private output(type: ObjectType, size: number): Output {
    if (size > this.limits.maxObjectBytes) throw new PackError(`an object of ${size} bytes is over the limit of ${this.limits.maxObjectBytes} bytes per object`);
    if (type !== 'blob' && size > WHOLE_OBJECT_BYTES) throw new PackError(`a ${type} of ${size} bytes is over the limit of ${WHOLE_OBJECT_BYTES} bytes`);
    if (type === 'blob' && size > WHOLE_BLOB_BYTES) return streamed(this.sink.largeBlob(size), size);
    return collected(this.sink, type);
  }
}

function collected(sink: PackSink, type: ObjectType): Output {
  const parts: Uint8Array[] = [];
  return {
    write(bytes) {
      parts.push(bytes);
    },
    async finish() {
      const content = parts.length === 1 ? Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, parts[0]!.byteLength) : Buffer.concat(parts);
      const oid = hashObject(type, content);
      await sink.object({ oid, type, content });
      return oid;
    },
    async abort() {},
  };
}

function streamed(writer: LargeBlobWriter, size: number): Output {
  const hash: Hash = createHash('sha1').update(`blob ${size}\0`);
  return {
    async write(bytes) {
      hash.update(bytes);
      await writer.write(bytes);
    },
    async finish() {
      const oid = hash.digest('hex');
      await writer.finish(oid);
      return oid;
    },
    abort: () => writer.abort(),
  };
}

/**
 * Reads the pack from `source` into `sink`; resolves with the number of objects once the trailer
 * checksum matched and every delta was resolved, or rejects with a `PackError` (or the sink's own
 * error). The source is let go of either way.
 */
export async function readPack(source: AsyncIterable<Uint8Array>, sink: PackSink, limits: PackLimits): Promise<number> {
  const input = new PackInput(source, limits.maxPackBytes);
  try {
    return await new PackReader(input, sink, limits).read();
  } finally {
    await input.close();
  }
}
