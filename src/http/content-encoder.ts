import type { EncodedBlobRef } from '../actors/commands/apply-ops.js';
import { CHUNK_SIZE, prepareObject } from '../storage/git-object-store.js';
import { FRONT_END_SLICE_MS, TimeSlice } from '../time-slice.js';

/**
 * The contents of one write, hashed and compressed by the front end as the objects the actor
 * stores (`ActorRequest.blobs`): the repository's one thread is what a busy repository waits on,
 * so that work stays off it. Each op gets its reference when the input is built; `encode` fills
 * in the oids. A request may hold up to 8 MiB of contents in memory, which takes tens of
 * milliseconds to compress: it is done in slices (`FRONT_END_SLICE_MS`), other requests running
 * between them.
 */
export class ContentEncoder {
  private readonly pending: Array<{ ref: EncodedBlobRef; bytes: Buffer }> = [];

  /** The reference an op carries to `bytes`; its oid is set by `encode`. */
  add(bytes: Buffer): EncodedBlobRef {
    // A body parsed whole is under SMALL_BODY_BYTES, and a streamed content is staged past a chunk.
    if (bytes.length > CHUNK_SIZE) throw new Error(`a content of ${bytes.length} bytes was not staged`);
    const ref = { index: this.pending.length, oid: '' };
    this.pending.push({ ref, bytes });
    return ref;
  }

  /** The stored values, in the order of the references. */
  async encode(): Promise<Uint8Array[]> {
    const blobs: Uint8Array[] = [];
    const slice = new TimeSlice(FRONT_END_SLICE_MS);
    for (const { ref, bytes } of this.pending) {
      if (slice.over) await slice.yield();
      const object = prepareObject('blob', bytes);
      ref.oid = object.oid;
      blobs.push(object.value);
    }
    return blobs;
  }
}
