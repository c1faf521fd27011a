import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { ROOT, exportRepo, startWithRepo } from './helpers.js';
import { streamRequest } from './streaming-client.js';

const MiB = 1024 * 1024;
const SIZE = 512 * MiB;

/**
 * The file: 1 MiB blocks of a repeated 16 KiB random pattern stamped with the block number —
 * different everywhere, cheap to generate, and compressible (the export deflates it).
 */
function block(pattern: Buffer, i: number): Buffer {
  const out = Buffer.allocUnsafe(MiB);
  for (let pos = 0; pos < MiB; pos += pattern.length) pattern.copy(out, pos);
  out.writeUInt32BE(i, 0);
  return out;
}

/** Reads the main thread's memory figures from the operator listener's Prometheus metrics. */
async function memory(metricsUrl: string): Promise<{ heap: number; external: number }> {
  const text = await (await fetch(metricsUrl)).text();
  const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  return { heap: value('repohost_process_nodejs_heap_size_used_bytes'), external: value('repohost_process_nodejs_external_memory_bytes') };
}

t.test('large files - a 512 MiB inline base64 content streams through apply-ops with a small heap and reads back byte-identical', { timeout: 180_000 }, async (t) => {
  const f = await startWithRepo(t, 'large');
  const pattern = randomBytes(16 * 1024);
  const hash = createHash('sha256');
  const gitHash = createHash('sha1').update(`blob ${SIZE}\0`);

  async function* body(): AsyncGenerator<Buffer> {
    yield Buffer.from(`{"base_change_id":"${ROOT}","message":"big","ops":[{"op":"write","path":"data/big.bin","encoding":"base64","content":"`);
    let carry: Buffer = Buffer.alloc(0);
    for (let i = 0; i < SIZE / MiB; i++) {
      const bytes = block(pattern, i);
      hash.update(bytes);
      gitHash.update(bytes);
      const all = carry.length ? Buffer.concat([carry, bytes]) : bytes;
      const whole = all.length - (all.length % 3);
      carry = all.subarray(whole);
      yield Buffer.from(all.subarray(0, whole).toString('base64'));
    }
    yield Buffer.from(`${carry.toString('base64')}"}]}`);
  }

  const peak = { heap: 0, external: 0 };
  const baseline = await memory(f.s.metricsUrl!);
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const m = await memory(f.s.metricsUrl!);
      peak.heap = Math.max(peak.heap, m.heap);
      peak.external = Math.max(peak.external, m.external);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const started = Date.now();
  const res = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' }, body());
  sampling = false;
  await sampler;
  t.equal(res.status, 201, res.text.slice(0, 500));
  t.comment(`512 MiB through apply-ops in ${((Date.now() - started) / 1000).toFixed(1)} s; main thread heap peak ${(peak.heap / MiB).toFixed(0)} MiB (baseline ${(baseline.heap / MiB).toFixed(0)}), external peak ${(peak.external / MiB).toFixed(0)} MiB`);
  // Growth over the baseline: the peak itself (101–128 MiB in full runs) depends on what the
  // server held before and when its collector ran, and a buffered body would add over 512 MiB.
  t.ok(peak.heap - baseline.heap < 128 * MiB, `the heap grows far less than the file size (${((peak.heap - baseline.heap) / MiB).toFixed(0)} MiB)`);
  t.ok(peak.external < 128 * MiB, 'so do buffers outside the heap');

  const change = await f.s.api('GET', `${f.base}/changes/${res.json.change.id}`);
  t.same(change.json.files, ['data/big.bin']);

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  const oid = x.git('rev-parse', 'main:data/big.bin').stdout.trim();
  t.equal(oid, gitHash.digest('hex'), 'the blob has the oid git computes for the bytes');
  t.equal(x.git('cat-file', '-s', oid).stdout.trim(), String(SIZE));
  const readBack = createHash('sha256');
  await new Promise<void>((resolve, reject) => {
    const cat = spawn('git', ['cat-file', 'blob', oid], { cwd: x.dir });
    cat.stdout.on('data', (d: Buffer) => readBack.update(d));
    cat.on('error', reject);
    cat.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`git cat-file exited ${code}`))));
  });
  t.equal(readBack.digest('hex'), hash.digest('hex'), 'git cat-file gives back the same 512 MiB');
  t.equal(x.fsckProblems(), null, 'git fsck --strict is clean');
});
