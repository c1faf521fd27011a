import { Worker } from 'node:worker_threads';
import t from 'tap';
import { attachWriterActivity, writerActivityBuffer, writersBusy, writersDone, yieldToWriters } from '../../src/actors/writer-activity.js';

// Bulk work waits while an actor thread has a batch under way: no longer than it is told to, and
// no longer than the batch once another thread ends it.
const MODULE = new URL('../../src/actors/writer-activity.js', import.meta.url).href;

function elapsed(fn: () => void): number {
  const started = performance.now();
  fn();
  return performance.now() - started;
}

attachWriterActivity(writerActivityBuffer());

t.test('no batch under way: no wait', async (t) => {
  t.ok(elapsed(() => yieldToWriters(1000)) < 500, 'returns at once');
});

t.test('a batch that never ends holds bulk work for the bound only', async (t) => {
  writersBusy();
  const waited = elapsed(() => yieldToWriters(150));
  writersDone();
  t.ok(waited >= 150, `waited ${waited.toFixed(0)} ms, the whole bound`);
  t.ok(waited < 2000, 'then went on');
});

t.test("another thread's batch releases the wait when it ends", async (t) => {
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     import(workerData.module).then((m) => {
       m.attachWriterActivity(workerData.buffer);
       m.writersBusy();
       parentPort.postMessage('busy');
       setTimeout(() => { m.writersDone(); parentPort.postMessage('done'); }, 100);
     });`,
    { eval: true, workerData: { module: MODULE, buffer: writerActivityBuffer() } },
  );
  t.teardown(() => worker.terminate());
  await new Promise((resolve) => worker.once('message', resolve));
  const waited = elapsed(() => yieldToWriters(10_000));
  t.ok(waited >= 50, `waited for the batch (${waited.toFixed(0)} ms)`);
  t.ok(waited < 5000, 'and no longer than it took');
  t.ok(elapsed(() => yieldToWriters(10_000)) < 500, 'nothing under way afterwards');
});
