import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { attachWriterActivity, busyWriters, releaseWriterSlot, writerActivityBuffer } from '../../src/actors/writer-activity.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { streamPack } from '../../src/git/pack-stream.js';
import { PackChannel, type ByteSink } from '../../src/git/response-writer.js';
import { openStorage } from '../../src/storage/database.js';
import { encodeInlineObject } from '../../src/storage/git-object-store.js';
import { K } from '../../src/storage/keys.js';
import { ObjectReader } from '../../src/storage/read/object-reader.js';
import type { WriterThreadData } from '../actors/fixtures/writer-thread.js';

/**
 * A clone's pack steps aside for the writers: while an actor thread has a batch under way, the
 * pack waits (at most 20 ms) after each 64 KiB it produces, and sends the same bytes either way.
 */
const dir = mkdtempSync(join(tmpdir(), 'repohost-pack-stream-'));
const storage = openStorage(dir);
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

const REPO = 'repo_1';
// 24 blobs of 60 KiB, which go out as stored (no compression to time): about 1.4 MiB of pack. A
// piece ends with the object that takes it past 64 KiB, the second: twelve pieces, twelve waits.
const oids = Array.from({ length: 24 }, () => {
  const content = randomBytes(60 * 1024);
  const oid = hashObject('blob', content);
  storage.objects.putSync(K.object(REPO, oid), encodeInlineObject('blob', content));
  return oid;
});
const WAITS = 12;
const WAIT_MS = 20;

async function pack(): Promise<{ bytes: Buffer; ms: number }> {
  const parts: Buffer[] = [];
  const sink: ByteSink = { write: (b) => void parts.push(Buffer.from(b)), flush: () => undefined, ready: async () => undefined };
  const reader = new ObjectReader(storage, REPO);
  const started = performance.now();
  try {
    await streamPack(reader, { count: oids.length, known: 0, oids }, new PackChannel(sink, 'none', true), sink, () => undefined);
  } finally {
    reader.release();
  }
  return { bytes: Buffer.concat(parts), ms: performance.now() - started };
}

attachWriterActivity(writerActivityBuffer());

t.test('a pack waits while a batch is under way, and its bytes are the same', async (t) => {
  // The fastest of three after a warm-up: the pack alone, not a pause of the loaded machine.
  await pack();
  const runs = [await pack(), await pack(), await pack()];
  const free = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
  t.ok(free.bytes.length >= WAITS * 64 * 1024, `${free.bytes.length} bytes of pack`);
  t.ok(free.ms < WAITS * WAIT_MS, `with no batch under way it does not wait (${free.ms.toFixed(0)} ms)`);

  const writer = new Worker(fileURLToPath(new URL('../actors/fixtures/writer-thread.js', import.meta.url)), {
    workerData: { buffer: writerActivityBuffer(), go: new SharedArrayBuffer(4), mode: 'hold' } satisfies WriterThreadData,
  });
  const [{ threadId }] = (await once(writer, 'message')) as [{ threadId: number }];
  t.teardown(async () => {
    await writer.terminate();
    releaseWriterSlot(threadId);
  });
  t.equal(busyWriters(), 1, 'a batch under way');

  const held = await pack();
  t.ok(held.ms >= WAITS * WAIT_MS, `beside the batch it waited ${WAIT_MS} ms a piece (${held.ms.toFixed(0)} ms)`);
  t.ok(held.ms < 5000, 'and still went on');
  t.ok(held.bytes.equals(free.bytes), 'the same pack');
});
