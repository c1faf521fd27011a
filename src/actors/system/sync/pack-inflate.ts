/**
 * Inflating one pack entry's zlib stream from a `PackInput`. An entry does not say how long its
 * compressed data is, only how many bytes it inflates to (its declared size, which a hostile
 * pack may state as anything): zlib finds the end, and what it did not use goes back to the input.
 *
 * Memory never follows the declared size. Small entries whose compressed data is buffered (or is
 * once more of the stream is added, up to 128 KiB) are inflated in one call whose output chunks are at
 * most 64 KiB and whose total may not pass the declared size; everything else streams through a
 * zlib stream in 64 KiB pieces, handed to `onData` one at a time (its promise is awaited before
 * zlib produces more).
 */
import { createInflate, inflateSync } from 'node:zlib';
import { PackError } from './pack-error.js';
import type { PackInput } from './pack-input.js';

const OUTPUT_CHUNK = 64 * 1024;
/** Buffered compressed bytes up to which a small entry is tried again in one call rather than streamed. */
const MERGE_LIMIT = 128 * 1024;

/** What `inflateSync` returns with `info: true`: the output and how much input it used. */
interface InflateResult {
  buffer: Buffer;
  engine: { bytesWritten: number };
}

export type DataHandler = (chunk: Buffer) => void | Promise<void>;

const longer = (): PackError => new PackError('an object inflates to more than its declared size');
const shorter = (): PackError => new PackError('an object inflates to less than its declared size');
const corrupt = (): PackError => new PackError('an object has corrupt compressed data');

/**
 * Inflates the entry at the input's position, whose inflated size is `size`. Entries up to
 * `wholeLimit` bytes may be inflated in one call when their compressed bytes are buffered.
 */
export async function inflateEntry(input: PackInput, size: number, wholeLimit: number, onData: DataHandler): Promise<void> {
  if (size <= wholeLimit) {
    let window = await input.available();
    while (window.length > 0) {
      let result: InflateResult;
      try {
        result = inflateSync(window, { info: true, chunkSize: Math.min(Math.max(64, size), OUTPUT_CHUNK), maxOutputLength: Math.max(1, size) }) as unknown as InflateResult;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === 'ERR_BUFFER_TOO_LARGE') throw longer();
        if (code !== 'Z_BUF_ERROR') throw corrupt();
        // The compressed data goes on past what is buffered: a small entry straddling chunks is
        // inflated again over twice the bytes (so the work stays linear); a longer one streams.
        if (window.length >= MERGE_LIMIT || !(await input.extend(2 * window.length))) break;
        window = await input.available();
        continue;
      }
      if (result.buffer.length !== size) throw result.buffer.length > size ? longer() : shorter();
      input.skip(result.engine.bytesWritten);
      await onData(result.buffer);
      return;
    }
  }
  await inflateStreaming(input, size, onData);
}

async function inflateStreaming(input: PackInput, size: number, onData: DataHandler): Promise<void> {
  const inflate = createInflate({ chunkSize: OUTPUT_CHUNK });
  let produced = 0;
  const consumer = (async () => {
    for await (const out of inflate as AsyncIterable<Buffer>) {
      produced += out.length;
      if (produced > size) throw longer();
      await onData(out);
    }
  })();
  // Settles only when the consumer fails (a zlib error reaches it, never a write callback).
  const failed = consumer.then(() => new Promise<never>(() => undefined));
  failed.catch(() => undefined);
  let fed = 0;
  try {
    for (;;) {
      const chunk = await input.take();
      if (chunk.length === 0) throw new PackError('the pack is truncated');
      fed += chunk.length;
      const written = new Promise<void>((resolve, reject) => inflate.write(chunk, (err) => (err ? reject(err) : resolve())));
      written.catch(() => undefined);
      await Promise.race([written, failed]);
      // zlib stops consuming at the end of the stream: the rest belongs to the next entry.
      if (inflate.bytesWritten < fed) {
        input.unread(fed - inflate.bytesWritten);
        break;
      }
    }
    await consumer;
  } catch (err) {
    inflate.destroy();
    // The consumer's own failure (zlib's error, or `onData`'s) is the cause; a write failing
    // because the consumer stopped is only its echo, as is the consumer's end after `destroy`.
    const consumerError = await consumer.then(
      () => null,
      (e: unknown) => e,
    );
    throw asFailure(consumerError !== null && !isStreamEnd(consumerError) ? consumerError : err);
  }
  inflate.destroy();
  if (produced !== size) throw shorter();
}

function codeOf(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code;
}

function isStreamEnd(err: unknown): boolean {
  return codeOf(err) === 'ERR_STREAM_PREMATURE_CLOSE' || (err as Error | null)?.name === 'AbortError';
}

/** zlib's errors are corrupt data; anything else (a limit, the receiver's own failure) stays. */
function asFailure(err: unknown): unknown {
  const code = codeOf(err);
  return typeof code === 'string' && code.startsWith('Z_') ? corrupt() : err;
}
