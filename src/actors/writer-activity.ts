import { threadId } from 'node:worker_threads';

/**
 * Whether writes are under way, shared by every thread of the process, so that bulk work (a
 * clone's pack) steps aside meanwhile. A low thread priority alone did not give the writers the
 * cores: on two cores a woken actor thread waited behind the front end on one core while the
 * other ran a pack thread, at nice 19 and in SCHED_IDLE alike
 * (docs/measurements/2026-11-29-clones-and-the-scheduler.md).
 *
 * A SharedArrayBuffer that the main thread makes and hands to the actor, read and pack workers in
 * their workerData. One count is what waiting threads sleep on; two kinds of work add to it. The
 * main thread counts each message it has sent an actor and not yet had answered (most are
 * writes), so a write counts from its dispatch, queued or running, before its actor thread has a
 * core. Each actor thread claims a slot (its thread id) and marks it busy from a batch's start
 * until the batch is on disk, which also covers batches no message of the main thread's started.
 * The main thread clears the slot of an actor thread that died, busy or not; the messages it had
 * fail and are answered.
 */

const SLOTS = 64;
const COUNT = 0;
const owner = (slot: number): number => 1 + slot;
const busyFlag = (slot: number): number => 1 + SLOTS + slot;

let made: SharedArrayBuffer | null = null;
let shared: Int32Array | null = null;
/** This thread's slot; -1 when it is not an actor thread (or found none free). */
let mine = -1;

/** The process's buffer, made on first use by the main thread; workers receive it. */
export function writerActivityBuffer(): SharedArrayBuffer {
  made ??= new SharedArrayBuffer(4 * (1 + 2 * SLOTS));
  return made;
}

/** A thread that only waits for the writers (a pack pool's). */
export function attachWriterActivity(buffer: SharedArrayBuffer): void {
  shared = new Int32Array(buffer);
}

/** An actor thread: attaches and claims a slot of its own. */
export function claimWriterSlot(buffer: SharedArrayBuffer): void {
  attachWriterActivity(buffer);
  for (let slot = 0; slot < SLOTS; slot++) {
    if (Atomics.compareExchange(shared!, owner(slot), 0, threadId) === 0) {
      mine = slot;
      return;
    }
  }
}

/** An actor thread starts a batch. */
export function writersBusy(): void {
  if (mine < 0) return;
  if (Atomics.exchange(shared!, busyFlag(mine), 1) === 0) Atomics.add(shared!, COUNT, 1);
}

/** An actor thread's batch is on disk (or failed). */
export function writersDone(): void {
  if (mine >= 0) clear(shared!, mine);
}

/** Main thread: the actor thread `id` is gone; a batch it left under way no longer counts. */
export function releaseWriterSlot(id: number): void {
  const all = new Int32Array(writerActivityBuffer());
  for (let slot = 0; slot < SLOTS; slot++) {
    if (Atomics.load(all, owner(slot)) !== id) continue;
    clear(all, slot);
    Atomics.store(all, owner(slot), 0);
  }
}

let mainView: Int32Array | null = null;

/** Main thread: a message is on its way to an actor. */
export function writeDispatched(): void {
  mainView ??= new Int32Array(writerActivityBuffer());
  Atomics.add(mainView, COUNT, 1);
}

/** Main thread: that message was answered, or failed. */
export function writeAnswered(): void {
  if (mainView && Atomics.sub(mainView, COUNT, 1) === 1) Atomics.notify(mainView, COUNT);
}

/** Messages to actors not yet answered plus actor threads with a batch under way, as waiting threads see it. */
export function busyWriters(): number {
  const all = shared ?? (made ? new Int32Array(made) : null);
  return all ? Atomics.load(all, COUNT) : 0;
}

function clear(all: Int32Array, slot: number): void {
  if (Atomics.exchange(all, busyFlag(slot), 0) === 1 && Atomics.sub(all, COUNT, 1) === 1) Atomics.notify(all, COUNT);
}

/**
 * Blocks while any write is under way, for at most `maxMs` in all: bulk work calls it between
 * pieces, and still gets a piece through every `maxMs` when writes never rest.
 */
export function yieldToWriters(maxMs: number): void {
  if (!shared) return;
  let busy = Atomics.load(shared, COUNT);
  if (busy <= 0) return;
  const deadline = performance.now() + maxMs;
  while (busy > 0) {
    const left = deadline - performance.now();
    if (left <= 0) return;
    Atomics.wait(shared, COUNT, busy, left);
    busy = Atomics.load(shared, COUNT);
  }
}
