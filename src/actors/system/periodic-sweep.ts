import { isServiceError } from '../../errors.js';
import type { SystemActor } from './index.js';

/**
 * A sweep run on a timer on the main thread, one at a time (a sweep still running when the timer
 * fires again is not doubled), stopped by waiting for the running one. `sweep` is told whether a
 * stop was asked, so a long sweep ends between two of its items.
 */
export function startPeriodicSweep(intervalMs: number, sweep: (stopped: () => boolean) => Promise<void>): SystemActor {
  let sweeping: Promise<void> | null = null;
  let stopped = false;
  const isStopped = (): boolean => stopped;
  const timer = setInterval(() => {
    sweeping ??= sweep(isStopped).finally(() => (sweeping = null));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await sweeping;
    },
  };
}

/** A busy mailbox or a restarting worker: the next sweep finds the same item, nothing to report. */
export function isTransientActorError(err: unknown): boolean {
  return isServiceError(err) && (err.code === 'RATE_LIMITED' || err.code === 'UNAVAILABLE');
}
