/**
 * Sending the walked objects as a pack, streamed: each object is read from LMDB, turned
 * into its pack entry and handed on before the next is read, so memory holds one object (one
 * 1 MiB chunk of a large blob) at a time, whatever the pack's size. The sink's back-pressure is
 * awaited as the bytes add up, so a slow client slows the pack down instead of filling memory.
 *
 * No object is compressed twice. A blob stored compressed goes out as stored (a zlib stream); one
 * stored as raw deflate by older versions gets a zlib frame, whose checksum needs the inflated
 * bytes (inflating costs a fraction of deflating). Blobs of 1–64 KiB stored as they are were found
 * not worth compressing when written, and commits, trees and blobs under 1 KiB do not repay a zlib
 * call (trees are mostly object ids; in the bench fixture level 1 saved 28 % of the trees' bytes
 * for five times the CPU of sending them stored): all of these go out as stored blocks. Only blobs
 * over 64 KiB, whose compressibility nobody checked, are deflated here, at the fastest level.
 */
import { once } from 'node:events';
import { constants, createDeflate, deflateSync, inflateRawSync } from 'node:zlib';
import { ServiceError } from '../errors.js';
import { PackWriter } from '../actors/system/sync/pack-writer.js';
import { busyWriters, yieldToWriters } from '../actors/writer-activity.js';
import { CHUNKED_BLOB, DEFLATED_BLOB, ZLIB_BLOB, decodeChunkedHeader, storedObjectType } from '../storage/git-object-store.js';
import { vanished, type ObjectReader } from '../storage/read/object-reader.js';
import type { PackObjects } from './reachable-sets.js';
import type { ByteSink, PackChannel } from './response-writer.js';
import { adler32, emitZlibStored, ZLIB_HEADER, zlibTrailer } from './zlib-frame.js';

/** Inline blobs this large or larger were never offered to the write path's compression. */
const UNCHECKED_BLOB_BYTES = 64 * 1024;

/** Pack bytes produced between two waits for the sink's room. */
const BYTES_BETWEEN_WAITS = 256 * 1024;
/**
 * Pack bytes produced between two looks at the writers, and the longest a pack then waits while
 * writes are under way (writer-activity.ts). Small pieces give a woken writer a core sooner; the
 * writes' p99 beside 8 clone loops follows the wait (at most 5 ms a piece: 41–124 ms, median 65;
 * 20 ms: 34–72 ms, median 55; docs/measurements/2026-11-29-pack-pauses.md). 20 ms bounds a pack
 * of small objects to about 3 MiB/s when writes never rest. A large file's chunk (1 MiB) is one
 * piece and waits up to 20 ms too. A pack ends its snapshot before it waits, so pages the writers
 * free meanwhile are not kept for it.
 */
const BYTES_BETWEEN_YIELDS = 64 * 1024;
const PIECE_YIELD_MS = 20;

/** Waits while writes are under way, holding no snapshot meanwhile (not even another read's of this thread). */
function stepAside(objects: ObjectReader): void {
  if (busyWriters() === 0) return;
  objects.release();
  yieldToWriters(PIECE_YIELD_MS);
}

export interface PackStats {
  objects: number;
  /** Objects sent with their stored compression. */
  reused: number;
}

export async function streamPack(objects: ObjectReader, pack: PackObjects, channel: PackChannel, sink: ByteSink, onProgress: (written: number) => void): Promise<PackStats> {
  let produced = 0;
  const writer = new PackWriter((bytes) => {
    produced += bytes.length;
    channel.data(bytes);
  });
  let reused = 0;
  let waitedAt = 0;
  let yieldedAt = 0;
  let written = 0;
  writer.start(pack.count);
  for (const oid of pack.oids) {
    const view = objects.view(oid);
    if (!view) throw vanished('object', oid);
    if (view[0] === CHUNKED_BLOB) {
      await streamChunkedBlob(objects, view, writer, sink);
      // It stepped aside after each of its chunks already.
      yieldedAt = produced;
    } else if (writeInline(writer, oid, view)) reused++;
    written++;
    if (produced - waitedAt >= BYTES_BETWEEN_WAITS) {
      waitedAt = produced;
      onProgress(written);
      // A client that reads slowly must not hold a snapshot while the pack waits for it.
      objects.release();
      await sink.ready();
    }
    if (produced - yieldedAt >= BYTES_BETWEEN_YIELDS) {
      yieldedAt = produced;
      stepAside(objects);
    }
  }
  if (written !== pack.count) throw new ServiceError('INTERNAL_ERROR', `a pack of ${pack.count} objects listed ${written}`);
  writer.finish();
  return { objects: written, reused };
}

/** An object stored inline, as its pack entry; true when its stored compression was reused. */
function writeInline(writer: PackWriter, oid: string, view: Buffer): boolean {
  const code = view[0];
  if (code === ZLIB_BLOB) {
    writer.entry('blob', view.readUInt32LE(1));
    writer.data(view.subarray(5));
    return true;
  }
  if (code === DEFLATED_BLOB) {
    const raw = view.subarray(5);
    writer.entry('blob', view.readUInt32LE(1));
    const checksum = adler32(inflateRawSync(raw));
    writer.data(ZLIB_HEADER);
    writer.data(raw);
    writer.data(zlibTrailer(checksum));
    return true;
  }
  const content = view.subarray(1);
  const type = storedObjectType(oid, view);
  writer.entry(type, content.length);
  if (type === 'blob' && content.length > UNCHECKED_BLOB_BYTES) writer.data(deflateSync(content, { level: constants.Z_BEST_SPEED }));
  else emitZlibStored(content, (bytes) => writer.data(bytes));
  return false;
}

/** A large blob: its chunks read one at a time and deflated as a stream into one zlib stream. */
async function streamChunkedBlob(objects: ObjectReader, value: Buffer, writer: PackWriter, sink: ByteSink): Promise<void> {
  const header = decodeChunkedHeader(value);
  writer.entry('blob', header.s);
  const deflate = createDeflate({ level: constants.Z_BEST_SPEED });
  const ended = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
  });
  ended.catch(() => undefined);
  deflate.on('data', (bytes: Buffer) => writer.data(bytes));
  try {
    for (let i = 0; i < header.n; i++) {
      // A copy: the deflater reads it after this thread's next LMDB read has reused the view.
      const hasRoom = deflate.write(Buffer.from(objects.chunk(header.u, i)));
      objects.release();
      if (!hasRoom) await Promise.race([once(deflate, 'drain'), ended]);
      await sink.ready();
      stepAside(objects);
    }
    deflate.end();
    await ended;
  } finally {
    deflate.destroy();
  }
}
