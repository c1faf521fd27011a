/**
import '../helpers/child-env.js';
 * `npm run bench -- --cluster 3` on the smoke preset: the single node, then a real 3-node cluster
 * (3 etcd members, 3 nats-servers) entered through one node, and the report's ratios and hop probe.
 * 45 s on a quiet machine, 90 s at a load of 25: behind REPOHOST_LONG_TESTS=1.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { BenchReport } from '../../bench/report-types.js';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));

t.setTimeout(300_000);

const skip = process.env.REPOHOST_LONG_TESTS === '1' ? false : 'a long test: set REPOHOST_LONG_TESTS=1';

t.test('bench --cluster 3 runs the cluster beside the single node and reports the ratios', { skip }, async (t) => {
  const dir = await mkdtemp(join(os.tmpdir(), 'bench-cluster-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [RUN, '--smoke', '--no-progress', '--out-dir', dir, '--cluster', '3', '--scenarios', 'agent-fleet,read:reused-token'], { maxBuffer: 64 * 1024 * 1024 }, (err, out, errOut) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout: out, stderr: errOut });
    });
  });
  t.equal(code, 0, `bench exits 0 (stderr tail: ${stderr.slice(-3000)})`);
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
  t.equal(files.length, 1, 'one report');
  const report = JSON.parse(await readFile(join(dir, files[0] as string), 'utf8')) as BenchReport;

  t.same(report.runs.map((r) => r.cluster?.nodes ?? null), [null, 3], 'a single-node run, then a 3-node run');
  const cluster = report.runs[1];
  t.equal(cluster?.cluster?.shardLog, 'jetstream', 'JetStream is the default log');
  const fleet = cluster?.results.find((r) => r.scenario === 'agent-fleet');
  t.equal(fleet?.status, 'ok', `agent-fleet ran on the cluster (${fleet?.note ?? ''})`);
  t.equal(fleet?.verification?.ok, true, 'the cluster kept every acknowledged write');
  t.ok(cluster?.results.every((r) => r.phases.every((p) => p.errors === 0)), 'no request failed on the cluster');

  const ratios = report.cluster;
  const closed = ratios?.rows.find((r) => r.scenario === 'agent-fleet' && r.phase === 'closed');
  t.ok(closed && closed.throughput !== null && closed.throughput > 0 && closed.p50 !== null && closed.p99 !== null, 'write ratios of agent-fleet');
  t.ok(ratios?.rows.some((r) => r.scenario === 'read' && r.throughput !== null), 'read throughput ratio');
  const hop = cluster?.cluster?.hop;
  t.ok(hop && hop.owner !== hop.via && hop.direct.count > 0 && hop.forwarded.count === hop.direct.count, 'hop probe through the owner and through another node');
  t.ok(ratios?.hop?.ratioP50 !== null && ratios?.hop !== null, 'hop ratio in the comparison');
  t.match(stdout, /Cluster of 3 \(jetstream shard log, clients enter through n1\)/, 'the summary prints the cluster ratios');
  t.match(stdout, /forwarding hop: p50/, 'and the hop');
});
