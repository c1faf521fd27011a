/**
 * Whether actor workers have a batch under way, shared by every thread of the process, so that
 * bulk work (a clone's pack) steps aside meanwhile. A low thread priority alone does not give the
 * writers the cores: on two cores the kernel leaves a woken actor thread queued behind the front
 * end on one core while the other runs a pack thread, whatever that thread's nice value or
 * scheduling policy (docs/measurements/2026-11-29-clones-and-the-scheduler.md).
 *
 * One Int32 in a SharedArrayBuffer that the main thread makes and hands to the actor and pack
 * workers in their workerData: how many actor threads have a batch between its start and its
 * sync. A thread that never attached (the main thread, tests) counts nothing and never waits.
 */

let made: SharedArrayBuffer | null = null;
let counter: Int32Array | null = null;

/** The process's buffer, made on first use; only the main thread calls it. */
export function writerActivityBuffer(): SharedArrayBuffer {
  made ??= new SharedArrayBuffer(4);
  return made;
}

/** Called once by a worker with the buffer from its workerData. */
export function attachWriterActivity(buffer: SharedArrayBuffer): void {
  counter = new Int32Array(buffer);
}

/** An actor thread starts a batch. */
export function writersBusy(): void {
  if (counter) Atomics.add(counter, 0, 1);
}

/** An actor thread's batch is on disk (or failed). */
export function writersDone(): void {
  if (counter && Atomics.sub(counter, 0, 1) === 1) Atomics.notify(counter, 0);
}

/**
 * Blocks while any actor thread has a batch under way, for at most `maxMs` in all: bulk work
 * calls it between pieces, and still gets a piece through every `maxMs` when writes never rest.
 */
export function yieldToWriters(maxMs: number): void {
  if (!counter) return;
  let busy = Atomics.load(counter, 0);
  if (busy <= 0) return;
  const deadline = performance.now() + maxMs;
  while (busy > 0) {
    const left = deadline - performance.now();
    if (left <= 0) return;
    Atomics.wait(counter, 0, busy, left);
    busy = Atomics.load(counter, 0);
  }
}
