/**
 * `node dist/bench/quota-refill.js [--rounds 3] [--writes 100]`: what the per-shard quota
 * allowances add to a write. One server per variant, 2 workers, one repository, sequential
 * apply-ops of one 2 KiB file each (from the root, so each stores a blob, a tree and a commit):
 *
 * - `unlimited`: no quota (settling only counts bytes);
 * - `roomy`: a quota of 1 GiB: the first write refills its shard with a 16 MiB chunk, every later
 *   one fits the allowance (the fast path);
 * - `refilling`: a quota of 320 KiB: chunks of 5 KiB, so about every second write is refused by
 *   its shard, refilled through the org's ledger and sent again.
 *
 * Rounds alternate the variants; each round prints the median and 90th percentile of the write
 * latency, and the actor commands answered per write (from /metrics: the write, and the refill's
 * `quota.grant` plus the write sent again with the grant).
 */
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startTestServer } from '../test/helpers/server.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, writes: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 3);
const WRITES = Number(values.writes ?? 100);
const ROOT = 'z'.repeat(32);

const VARIANTS: Array<{ name: string; quota: number }> = [
  { name: 'unlimited', quota: 0 },
  { name: 'roomy', quota: 1024 * 1024 * 1024 },
  { name: 'refilling', quota: 320 * 1024 },
];

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** Commands the actors answered so far (every reply observes its queue wait once). */
async function commandsAnswered(s: Awaited<ReturnType<typeof startTestServer>>): Promise<number> {
  const m = /^repohost_actor_queue_wait_seconds_count (\d+)/m.exec(await s.metrics());
  return m ? Number(m[1]) : NaN;
}

async function run(quota: number): Promise<{ p50: number; p90: number; refused: number; commandsPerWrite: number }> {
  const s = await startTestServer({ workers: 2, env: quota > 0 ? { REPOHOST_ORG_QUOTA_BYTES: String(quota) } : {} });
  try {
    const created = await s.api('POST', `/${s.org}/repos`, { body: { name: 'bench' } });
    if (created.status !== 201) throw new Error(created.text);
    const times: number[] = [];
    let refused = 0;
    const before = await commandsAnswered(s);
    for (let i = 0; i < WRITES; i++) {
      const body = { base_change_id: ROOT, ops: [{ op: 'write', path: `f${i}.bin`, content: randomBytes(2048).toString('base64'), encoding: 'base64' }] };
      const started = performance.now();
      const res = await s.api('POST', `/${s.org}/bench/apply-ops`, { body });
      times.push(performance.now() - started);
      if (res.status === 413) refused++;
      else if (res.status !== 201) throw new Error(res.text);
    }
    const commandsPerWrite = ((await commandsAnswered(s)) - before) / WRITES;
    times.sort((a, b) => a - b);
    return { p50: percentile(times, 50), p90: percentile(times, 90), refused, commandsPerWrite };
  } finally {
    await s.stop();
    s.cleanup();
  }
}

for (let round = 1; round <= ROUNDS; round++) {
  for (const v of VARIANTS) {
    const r = await run(v.quota);
    console.log(`round ${round} ${v.name.padEnd(9)} p50 ${r.p50.toFixed(2)} ms  p90 ${r.p90.toFixed(2)} ms  refused ${r.refused}/${WRITES}  actor commands per write ${r.commandsPerWrite.toFixed(2)}`);
  }
}
