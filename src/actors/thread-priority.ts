import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * On Linux a nice value belongs to one thread: a worker thread that runs long CPU work lowers its
 * own, so that when that work competes with the front end (or an actor) for a core, the short
 * work wins the core. Elsewhere, or where not permitted, the thread keeps the default priority.
 */
export function yieldToFrontEnd(): void {
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
  } catch {
    // not Linux, or not allowed: keep the default priority
  }
}
