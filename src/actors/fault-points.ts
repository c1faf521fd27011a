/**
 * Crash points for tests, and only for tests: `REPOHOST_FAULT=<point>` (read once, at start-up)
 * makes the process kill itself with SIGKILL when it reaches that point, so a test can check what
 * a `kill -9` between two steps of a saga leaves behind. Unset in any real deployment.
 */
const armed = process.env.REPOHOST_FAULT ?? '';

export function faultPoint(point: string): void {
  if (armed === point) process.kill(process.pid, 'SIGKILL');
}
