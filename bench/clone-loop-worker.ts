/**
 * `clone-isolation`'s clone clients, on a thread of their own at the lowest priority: they share
 * the machine's cores with the server, and a client's CPU (reading tens of MiB a second) is not
 * the server's cost. At the orchestrator's priority the clients took the cores as the server's
 * threads did, which the writes' latency then counted against the server. The thread runs
 * `loops` clone loops back to back until told to stop, then posts what they did.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority } from '../src/actors/thread-priority.js';
import { cloneOnce } from './clone-request.js';
import { createHistogram, encodeHistogram } from './histogram.js';

export interface CloneLoopsData {
  url: string;
  token: string;
  body: string;
  loops: number;
}

/** What the loops did: `histogram` of clone times in µs, encoded. */
export interface CloneLoopsResult {
  clones: number;
  bytes: number;
  seconds: number;
  failures: string[];
  histogram: string;
}

/** After this many failed clones the loops give up (the server is refusing them). */
const MAX_FAILURES = 20;
const LOWEST_NICE = 19;

lowerThreadPriority(LOWEST_NICE);
const { url, token, body, loops } = workerData as CloneLoopsData;
const result: CloneLoopsResult = { clones: 0, bytes: 0, seconds: 0, failures: [], histogram: '' };
const histogram = createHistogram();
let running = true;
parentPort!.once('message', () => (running = false));
const started = performance.now();
await Promise.all(
  Array.from({ length: loops }, async () => {
    while (running) {
      const outcome = await cloneOnce(new URL(url), token, body);
      if (outcome.problem) {
        result.failures.push(outcome.problem);
        if (result.failures.length > MAX_FAILURES) running = false;
        continue;
      }
      result.clones++;
      result.bytes += outcome.bytes;
      histogram.recordValue(Math.max(1, Math.round(outcome.ms * 1000)));
    }
  }),
);
result.seconds = (performance.now() - started) / 1000;
result.histogram = encodeHistogram(histogram);
parentPort!.postMessage(result);
