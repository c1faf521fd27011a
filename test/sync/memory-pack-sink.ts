import type { LargeBlobWriter, PackBase, PackObject, PackSink } from '../../src/actors/system/sync/pack-reader.js';
import type { ObjectType } from '../../src/vcs/object-store.js';

/**
 * A pack receiver for the reader's tests: keeps every object in memory (large blobs assembled
 * from their pieces) and serves them, and the objects it is told it already holds, as bases.
 */
export class MemoryPackSink implements PackSink {
  readonly objects: PackObject[] = [];
  /** Sizes of the pieces each large blob arrived in. */
  readonly largePieces: number[][] = [];
  aborted = 0;
  private readonly byOid = new Map<string, { type: ObjectType; content: Buffer }>();

  constructor(private readonly held: Map<string, { type: ObjectType; content: Buffer }> = new Map()) {}

  object(object: PackObject): void {
    this.objects.push(object);
    this.byOid.set(object.oid, object);
  }

  largeBlob(): LargeBlobWriter {
    const parts: Buffer[] = [];
    const pieces: number[] = [];
    return {
      write: async (bytes) => {
        parts.push(Buffer.from(bytes));
        pieces.push(bytes.length);
      },
      finish: async (oid) => {
        this.largePieces.push(pieces);
        this.object({ oid, type: 'blob', content: Buffer.concat(parts) });
      },
      abort: async () => {
        this.aborted++;
      },
    };
  }

  base(oid: string): PackBase | undefined {
    const object = this.byOid.get(oid) ?? this.held.get(oid);
    return object && { type: object.type, size: object.content.length, read: (offset, length) => object.content.subarray(offset, offset + length) };
  }
}

/** `bytes` as a stream of pieces of `size` bytes (the last may be shorter). */
export async function* pieces(bytes: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let pos = 0; pos < bytes.length; pos += size) yield bytes.subarray(pos, pos + size);
}
