import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * Nice values of worker threads. On Linux a nice value belongs to one thread: a worker that runs
 * long CPU work lowers its own, so that when that work competes with the front end (or an actor)
 * for a core, the short work wins the core. A thread cannot raise it again without privilege,
 * so work of different urgency needs threads of its own.
 */

/** Work a client waits for, but that must not hold up short requests: diffs, signature checks. */
export const BACKGROUND_NICE = 10;
/** Bulk transfers (a clone's pack): they take what the short requests leave. */
export const BULK_NICE = 19;

/** Lowers the calling thread's priority; elsewhere, or where not permitted, it keeps the default. */
export function lowerThreadPriority(nice: number): void {
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), nice);
  } catch {
    // not Linux, or not allowed: keep the default priority
  }
}
