import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import t, { type Test } from 'tap';
import {
  attachWriterActivity,
  busyWriters,
  claimWriterSlot,
  releaseWriterSlot,
  writeAnswered,
  writeDispatched,
  writerActivityBuffer,
  writersBusy,
  writersDone,
  yieldToWriters,
} from '../../src/actors/writer-activity.js';
import type { WriterThreadData } from './fixtures/writer-thread.js';

// Bulk work waits while an actor thread has a batch under way: no longer than it is told to, no
// longer than the batch once the actor thread ends it, and not for a thread that died.
const WRITER = fileURLToPath(new URL('./fixtures/writer-thread.js', import.meta.url));
const now = (): number => performance.timeOrigin + performance.now();

function elapsed(fn: () => void): number {
  const started = performance.now();
  fn();
  return performance.now() - started;
}

/**
 * A writer thread in `mode`, once its batch is under way; `go()` flags it to carry on. Ended with
 * the test, and its slot released as the runtime does for a worker that is gone.
 */
async function writerThread(t: Test, mode: WriterThreadData['mode']): Promise<{ worker: Worker; threadId: number; go: () => void }> {
  const go = new SharedArrayBuffer(4);
  const worker = new Worker(WRITER, { workerData: { buffer: writerActivityBuffer(), go, mode } satisfies WriterThreadData });
  const [message] = (await once(worker, 'message')) as [{ threadId: number }];
  const flag = new Int32Array(go);
  t.teardown(async () => {
    await worker.terminate();
    releaseWriterSlot(message.threadId);
  });
  return {
    worker,
    threadId: message.threadId,
    go: () => {
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
    },
  };
}

attachWriterActivity(writerActivityBuffer());

t.test('no batch under way: no wait', async (t) => {
  t.equal(busyWriters(), 0);
  t.ok(elapsed(() => yieldToWriters(1000)) < 500, 'returns at once');
});

t.test("another thread's batch holds bulk work until it ends", async (t) => {
  const writer = await writerThread(t, 'release');
  t.equal(busyWriters(), 1, 'one batch under way');
  const done = once(writer.worker, 'message') as Promise<[{ at: number }]>;
  writer.go();
  yieldToWriters(10_000);
  const returned = now();
  const [{ at }] = await done;
  t.ok(returned >= at - 1, 'the wait ended with the batch, not before');
  t.ok(returned - at < 5000, 'and not long after');
  t.equal(busyWriters(), 0, 'nothing under way afterwards');
});

t.test('a batch that never ends holds bulk work for the bound only', async (t) => {
  await writerThread(t, 'hold');
  const waited = elapsed(() => yieldToWriters(150));
  t.ok(waited >= 150, `waited ${waited.toFixed(0)} ms, the whole bound`);
  t.ok(waited < 5000, 'then went on');
});

t.test("a dead thread's batch stops counting once its slot is released", async (t) => {
  const writer = await writerThread(t, 'hold');
  t.equal(busyWriters(), 1, 'under way when the thread dies');
  await writer.worker.terminate();
  releaseWriterSlot(writer.threadId);
  t.equal(busyWriters(), 0, 'no longer counted');
  t.ok(elapsed(() => yieldToWriters(10_000)) < 500, 'bulk work goes on at once');
  releaseWriterSlot(writer.threadId);
  t.equal(busyWriters(), 0, 'a second release changes nothing');
});

t.test('a thread that ends its own batch twice counts it once', async (t) => {
  claimWriterSlot(writerActivityBuffer());
  writersBusy();
  writersBusy();
  t.equal(busyWriters(), 1);
  writersDone();
  writersDone();
  t.equal(busyWriters(), 0);
});

t.test('a message on its way to an actor holds bulk work until it is answered', async (t) => {
  writeDispatched();
  writeDispatched();
  t.equal(busyWriters(), 2, 'two messages unanswered');
  const waited = elapsed(() => yieldToWriters(100));
  t.ok(waited >= 100, `waited ${waited.toFixed(0)} ms while they were`);
  writeAnswered();
  writeAnswered();
  t.equal(busyWriters(), 0, 'none once both are answered');
  t.ok(elapsed(() => yieldToWriters(10_000)) < 500, 'bulk work goes on at once');
});

t.test('bulk work waiting in another thread goes on as soon as the last message is answered', async (t) => {
  writeDispatched();
  let answered = false;
  const answer = (): void => {
    if (!answered) writeAnswered();
    answered = true;
  };
  const bulk = new Worker(fileURLToPath(new URL('./fixtures/bulk-thread.js', import.meta.url)), { workerData: writerActivityBuffer() });
  t.teardown(async () => {
    answer(); // the count back to none, whatever failed
    await bulk.terminate();
  });
  const failed = once(bulk, 'error').then(([err]) => Promise.reject(err as Error));
  failed.catch(() => undefined); // raced below; an error after the race is the teardown's
  const done = new Promise<{ at: number }>((resolve) => bulk.on('message', (m: { type: string; at: number }) => m.type === 'done' && resolve(m)));
  await Promise.race([once(bulk, 'message'), failed]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const answeredAt = now();
  answer();
  const { at } = await Promise.race([done, failed]);
  t.ok(at >= answeredAt - 1, 'it waited for the answer');
  t.ok(at - answeredAt < 5000, `and was woken by it (${(at - answeredAt).toFixed(0)} ms later), not by its 10 s bound`);
});
