import { log } from '../log.js';

/**
 * Crash and stall points for tests, and only for tests (both settings are read once, at start-up,
 * and unset in any real deployment). `REPOHOST_FAULT=<point>` makes the process kill itself with
 * SIGKILL when it reaches that point, so a test can check what a `kill -9` between two steps of a
 * saga leaves behind.
 */
const armed = process.env.REPOHOST_FAULT ?? '';

export function faultPoint(point: string): void {
  if (armed === point) process.kill(process.pid, 'SIGKILL');
}

const stalled = process.env.REPOHOST_STALL ?? '';
const stallMs = Number(process.env.REPOHOST_STALL_MS) || 3000;

/**
 * `REPOHOST_STALL=<point>:<subject>` makes the thread that reaches that point for that subject (a
 * command's name) busy for REPOHOST_STALL_MS (default 3 s), as a long synchronous step would, so a
 * test can stop the process mid-step. It logs `stalling` as it starts: the test's cue. Unarmed, it
 * costs one comparison: it sits in every command's transaction.
 */
export function stallPoint(point: string, subject: string): void {
  if (!stalled || stalled !== `${point}:${subject}`) return;
  log.info('stalling', { point, ms: stallMs });
  const until = performance.now() + stallMs;
  while (performance.now() < until);
}
