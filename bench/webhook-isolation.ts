/**
 * What a dead webhook target costs the writers (API §11.3: "a slow or dead target never slows
 * writes"): apply-ops p99 with no webhook target, then on a fresh server with one org-wide target
 * whose receiver accepts connections and never answers. Reported as the ratio of the two p99s.
 *
 *   node dist/bench/webhook-isolation.js [--agents 16] [--writes 60] [--workers 2]
 *
 * Method: a real server per run (`startRepohost`, temporary data directory). Each agent owns a
 * repository and writes apply-ops (one 2 KiB file, default bookmark advanced) in a loop with a
 * 5 ms pause, so the load is moderate and equal in both runs; the first 10 writes of every agent
 * are warm-up. Latency in an HDR histogram, from send to response.
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { ApiClient, mapLimit } from './api-client.js';
import { createHistogram, summarize } from './histogram.js';
import type { LatencySummary } from './report-types.js';
import { createOrgAndKey, startRepohost } from './server-process.js';
import { createSigner } from './tokens.js';

const ROOT = 'z'.repeat(32);
const WARMUP_WRITES = 10;

async function measure(opts: { agents: number; writes: number; workers: number; deadTarget: boolean }): Promise<LatencySummary> {
  const dir = await mkdtemp(join(os.tmpdir(), 'repohost-webhook-isolation-'));
  let receiver: Server | null = null;
  const server = await startRepohost({ dataDir: join(dir, 'data'), workers: opts.workers, logFile: join(dir, 'server.log') });
  try {
    const key = await createOrgAndKey(join(dir, 'data'), 'bench');
    const api = new ApiClient(server.url, 'bench', await (await createSigner(key))());
    if (opts.deadTarget) {
      // Accepts the connection, never answers: every delivery waits for its 10 s timeout.
      receiver = createServer(() => undefined);
      await new Promise<void>((resolve) => receiver!.listen(0, '127.0.0.1', resolve));
      const port = (receiver.address() as { port: number }).port;
      await api.expect(201, 'POST', '/v1/bench/webhook-targets', {
        url: `http://127.0.0.1:${port}/hook`,
        events: ['repo.created', 'change.created', 'bookmark.moved', 'bookmark.created'],
      });
    }
    const histogram = createHistogram();
    await mapLimit(
      Array.from({ length: opts.agents }, (_, i) => i),
      opts.agents,
      async (agent) => {
        const repo = `agent-${agent}`;
        await api.expect(201, 'POST', '/v1/bench/repos', { name: repo });
        let parent = ROOT;
        for (let i = 0; i < opts.writes; i++) {
          const started = performance.now();
          const res = await api.expect<{ change: { id: string } }>(201, 'POST', `/v1/bench/${repo}/apply-ops`, {
            base_change_id: parent,
            ops: [{ op: 'write', path: `file-${i % 3}.txt`, content: `${'x'.repeat(2048)}${i}`, encoding: 'utf-8' }],
            bookmarks: [{ name: 'main' }],
          });
          if (i >= WARMUP_WRITES) histogram.recordValue(Math.max(1, Math.round((performance.now() - started) * 1000)));
          parent = res.change.id;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      },
    );
    await api.close();
    return summarize(histogram);
  } finally {
    await server.stop();
    receiver?.closeAllConnections();
    receiver?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { agents: { type: 'string' }, writes: { type: 'string' }, workers: { type: 'string' } } });
  const opts = { agents: Number(values.agents ?? 16), writes: Number(values.writes ?? 60), workers: Number(values.workers ?? os.cpus().length) };
  const without = await measure({ ...opts, deadTarget: false });
  const withDead = await measure({ ...opts, deadTarget: true });
  const ratio = withDead.p99 / without.p99;
  process.stdout.write(
    JSON.stringify({ scenario: 'webhook-isolation', ...opts, noTargets: without, deadTarget: withDead, p99Ratio: Number(ratio.toFixed(2)) }, null, 2) + '\n',
  );
}

await main();
