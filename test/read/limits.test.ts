import t from 'tap';
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { ROOT, applyOps, startWithRepo } from '../changes/helpers.js';
import { writeOp } from './read-helpers.js';

const name = (i: number): string => `files/f${String(i).padStart(5, '0')}.txt`;

t.test('limits', async (t) => {
  const f = await startWithRepo(t, 'wide');
  const write = async (body: Record<string, unknown>): Promise<string> => {
    const res = await applyOps(f, body);
    if (res.status >= 300) throw new Error(res.text);
    return res.json.change.id as string;
  };
  const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, k) => from + k);
  // An explicit mode: without one, apply-ops looks each path up in its (large) directory.
  let clock = Date.now();
  const first = await write({ base_change_id: ROOT, ops: range(0, 5025).map((i) => writeOp(name(i), `file ${i}\n`, '100644')), bookmarks: [{ name: 'main', create: true }] });
  const wide = await write({ base_change_id: first, ops: range(5025, 10_050).map((i) => writeOp(name(i), `file ${i}\n`, '100644')) });
  const edited = await write({ base_change_id: wide, ops: range(0, 3000).map((i) => writeOp(name(i * 3), `file ${i * 3}\nedited\n`, '100644')) });
  t.comment(`setup: 13,050 file writes in ${Date.now() - clock} ms`);
  clock = Date.now();

  t.test('content: a listing stops at 10,000 rows with truncated, child_count is complete', async (t) => {
    const res = await f.s.api('GET', `${f.base}/content?change_id=${wide}&path=files`);
    t.equal(res.status, 200);
    t.equal(res.json.child_count, 10_050);
    t.equal(res.json.entries.length, 10_000);
    t.equal(res.json.truncated, true);
    t.equal(res.json.entries[9999].path, name(9999));
    const root = await f.s.api('GET', `${f.base}/content?change_id=${wide}&depth=2`);
    t.equal(root.json.entries.length, 10_000, 'deeper rows count against the same limit');
    t.equal(root.json.entries[0].path, 'files');
    t.equal(root.json.truncated, true);
  });

  t.test('diff: hunks for 3,000 entries, file_limit after, rows stop at 10,000 with truncated', async (t) => {
    const res = await f.s.api('GET', `${f.base}/diff?base_change_id=${ROOT}&head_change_id=${wide}`);
    t.equal(res.status, 200);
    const { stats, entries, truncated } = res.json;
    t.equal(stats.entries, 10_050, 'stats count every entry');
    t.equal(entries.length, 10_000);
    t.equal(truncated, true);
    t.equal(stats.additions, 3000, 'lines are counted for the entries with hunks');
    t.match(entries[2999], { path: name(2999), omitted_reason: null, hunks: [{ lines: [{ kind: 'added', text: 'file 2999' }] }] });
    t.strictSame(entries[3000], { path: name(3000), status: 'added', old_path: null, size_bytes: 10, is_conflicted: false, omitted_reason: 'file_limit', hunks: null });
    t.equal(entries[9999].omitted_reason, 'file_limit');
    const patch = await f.s.api('GET', `${f.base}/diff?base_change_id=${ROOT}&head_change_id=${wide}`, { headers: { accept: 'text/plain' } });
    t.equal(patch.text.split('\ndiff --git ').length, 10_050, 'the patch has no entry limit');
  });

  t.test('small reads stay fast while 3,000-file diffs run', async (t) => {
    const token = await f.s.token();
    /** Sequential GET /{org}/{repo} for `ms`; sorted latencies. */
    const sample = async (ms: number): Promise<number[]> => {
      const samples: number[] = [];
      const until = performance.now() + ms;
      while (performance.now() < until) {
        const started = performance.now();
        const res = await fetch(`${f.s.url}/v1${f.base}`, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        samples.push(performance.now() - started);
        if (res.status !== 200) throw new Error(`GET repo: ${res.status}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return samples.sort((a, b) => a - b);
    };
    /** The front end's event-loop delay since the last call (prom-client resets it per scrape). */
    const loopLag = async (): Promise<{ p99: number; max: number }> => {
      const text = await (await fetch(f.s.metricsUrl!)).text();
      const value = (name: string): number => 1000 * Number(new RegExp(`^repohost_process_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      return { p99: value('p99'), max: value('max') };
    };
    const p = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;

    // The diffs are requested from another thread so that receiving them never delays this
    // thread's measurements; 'run' and 'pause' switch the load on and off.
    const loader = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       let running = false, closing = false, done = 0, ms = 0, wake = null;
       parentPort.on('message', (m) => { running = m === 'run'; closing = m === 'close'; if (wake) { wake(); wake = null; } });
       (async () => {
         while (!closing) {
           if (!running) { await new Promise((r) => (wake = r)); continue; }
           const started = Date.now();
           const res = await fetch(workerData.url, { headers: workerData.headers });
           await res.arrayBuffer();
           if (res.status !== 200) throw new Error('diff failed: ' + res.status);
           done++; ms += Date.now() - started;
         }
         parentPort.postMessage({ done, ms });
       })();`,
      {
        eval: true,
        workerData: {
          url: `${f.s.url}/v1${f.base}/diff?base_change_id=${wide}&head_change_id=${edited}`,
          headers: { authorization: `Bearer ${token}` },
        },
      },
    );
    const finished = new Promise<{ done: number; ms: number }>((resolve, reject) => {
      loader.once('message', resolve);
      loader.once('error', reject);
    });

    // Scheduling noise on a shared machine only ever makes a read slower, so a measurement is
    // retried (up to 3 times) rather than loosened. The bound is 20 ms, or 20 ms on top of the
    // quiet p99 of the same attempt when the machine itself is that noisy. A diff served on the
    // front end's thread would add its whole duration (hundreds of ms) to most reads: the p50
    // check catches that whatever the noise.
    let passed = false;
    for (let attempt = 1; attempt <= 3 && !passed; attempt++) {
      const quiet = await sample(1000);
      loader.postMessage('run');
      await new Promise((r) => setTimeout(r, 300));
      await loopLag(); // resets the server's event-loop delay histogram
      const busy = await sample(2500);
      const lag = await loopLag();
      loader.postMessage('pause');
      // A quiet machine reads in well under 5 ms at p99; what it takes beyond that is noise.
      const bound = 20 + Math.max(0, p(quiet, 0.99) - 5);
      passed = p(busy, 0.99) < bound && p(busy, 0.5) < p(quiet, 0.5) + 5 && busy.length >= 100;
      t.comment(
        `attempt ${attempt}: GET /{org}/{repo} quiet p50 ${p(quiet, 0.5).toFixed(2)} / p99 ${p(quiet, 0.99).toFixed(2)} ms (${quiet.length} reads); ` +
          `while diffs run p50 ${p(busy, 0.5).toFixed(2)} / p99 ${p(busy, 0.99).toFixed(2)} ms (${busy.length} reads), bound ${bound.toFixed(2)} ms; ` +
          `server event-loop delay p99 ${lag.p99.toFixed(2)} / max ${lag.max.toFixed(2)} ms`,
      );
    }
    loader.postMessage('close');
    const { done, ms } = await finished;
    await loader.terminate();
    t.comment(`${done} diffs of 3,000 modified files, ${(ms / Math.max(1, done)).toFixed(0)} ms each`);
    t.ok(done >= 2, 'diffs ran during the measurements');
    t.ok(passed, 'p99 of small reads stays under the bound while 3,000-file diffs run');
  });
});
