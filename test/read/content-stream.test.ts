import t from 'tap';
import { createHash } from 'node:crypto';
import { Agent, fetch as undiciFetch } from 'undici';
import { applyOps, ROOT, startWithRepo } from '../changes/helpers.js';

const SIZE = 100 * 1024 * 1024;
const MiB = 1024 * 1024;

/** 100 MiB where every 1 MiB piece differs, so a misplaced or repeated chunk changes the hash. */
function bigContent(): Buffer {
  const content = Buffer.allocUnsafe(SIZE);
  for (let i = 0; i < SIZE / MiB; i++) content.fill(`chunk ${i};`, i * MiB, (i + 1) * MiB);
  return content;
}

async function serverMemory(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return value('repohost_process_nodejs_heap_size_used_bytes') + value('repohost_process_nodejs_external_memory_bytes');
}

t.test('content - a 100 MiB file streams raw, chunk by chunk, with flat server memory', async (t) => {
  const f = await startWithRepo(t, 'media', { env: { REPOHOST_BRAND: 'Mesa' } });
  let content: Buffer | null = bigContent();
  const oid = createHash('sha1').update(`blob ${SIZE}\0`).update(content).digest('hex');
  const upload = await f.s.api('POST', `${f.base}/blobs`, { raw: content, headers: { 'content-type': 'application/octet-stream' } });
  t.equal(upload.status, 201, upload.text);
  t.equal(upload.json.oid, oid);
  content = null;
  const created = await applyOps(f, { base_change_id: ROOT, ops: [{ op: 'write', path: 'video.bin', blob_oid: oid }], bookmarks: [{ name: 'main', create: true }] });
  t.equal(created.status, 201, created.text);

  // The upload leaves garbage behind; the baseline is the lowest reading once it settles.
  let baseline = Infinity;
  for (let i = 0; i < 8; i++) {
    baseline = Math.min(baseline, await serverMemory(f.s.metricsUrl!));
    await new Promise((r) => setTimeout(r, 250));
  }

  // A connection of its own: one left idle by the upload may have been closed by the server.
  const dispatcher = new Agent();
  t.teardown(() => dispatcher.close());
  // A stream that stops making progress fails the test in seconds, not at undici's 5 minutes.
  const stalled = new AbortController();
  let watchdog = setTimeout(() => stalled.abort(), 15_000);
  const res = await undiciFetch(`${f.s.url}/v1${f.base}/content?path=video.bin`, {
    headers: { authorization: `Bearer ${await f.s.token()}`, accept: 'application/octet-stream' },
    dispatcher,
    signal: stalled.signal,
  });
  t.equal(res.status, 200, f.s.logs.slice(-5).join('\n'));
  t.equal(res.headers.get('x-mesa-blob-hash'), oid, 'the blob headers carry the configured brand word');
  t.equal(res.headers.get('x-mesa-blob-size'), String(SIZE));
  t.equal(res.headers.get('x-svc-blob-hash'), null);
  t.equal(res.headers.get('content-length'), String(SIZE));
  const hash = createHash('sha1').update(`blob ${SIZE}\0`);
  let received = 0;
  let peak = 0;
  let nextSample = 0;
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      clearTimeout(watchdog);
      watchdog = setTimeout(() => stalled.abort(), 15_000);
      if (done) break;
      hash.update(value);
      received += value.length;
      if (received >= nextSample) {
        // Consume slowly and watch the server while it has to wait for us.
        nextSample += 5 * MiB;
        await new Promise((r) => setTimeout(r, 100));
        peak = Math.max(peak, await serverMemory(f.s.metricsUrl!));
      }
    }
  } catch (err) {
    t.comment(`the stream stopped after ${received} bytes: ${(err as Error).message}`);
  } finally {
    clearTimeout(watchdog);
  }
  t.equal(received, SIZE);
  t.equal(hash.digest('hex'), oid, 'the bytes arrive complete and in order');
  const growth = peak - baseline;
  t.comment(`server heap + external: baseline ${(baseline / MiB).toFixed(1)} MiB, peak while streaming ${(peak / MiB).toFixed(1)} MiB`);
  t.ok(growth < 24 * MiB, `server memory grew by ${(growth / MiB).toFixed(1)} MiB while streaming 100 MiB`);
});
