/**
 * `--cluster N`: a local cluster as the server under test: 3 etcd members, 3 nats-servers (with
 * the JetStream log) and N repohost nodes, each a bench server process with its own data
 * directory and log file. The engines and the members' settings are the cluster tests' own
 * (test/helpers/cluster-engines.ts, cluster-settings.ts). The bench org and its key are made in a
 * seed directory and imported into etcd, as an operator would (`repohost cluster import-orgs`).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LEASE_LOST_EXIT, type NodeStatus } from '../src/cluster/cluster-node.js';
import { freePorts, startEtcd, startNats } from '../test/helpers/cluster-engines.js';
import { CLI_NODE_SETTINGS, clusterSettings, nodeSettings, unsettledReason, type ShardLogKind } from '../test/helpers/cluster-settings.js';
import type { RunningServer } from './server-process.js';
import { PROJECT_ROOT, SERVER_ENTRY, createOrgAndKey, startRepohost } from './server-process.js';
import type { SigningKey } from './tokens.js';

const SETTLE_TIMEOUT_MS = 90_000;
/**
 * As in the failover tests: with 5 s, keepalives on this loaded machine went unconfirmed long
 * enough at start for nodes to lose their leases. Only failover waits on it, which the bench does
 * not measure.
 */
const LEASE_TTL_S = 10;

type ClusterMember = RunningServer & { id: string };

export interface BenchCluster {
  /** Node i is `n${i + 1}`. */
  nodes: ClusterMember[];
  key: SigningKey;
  stop(): Promise<void>;
}

export async function startBenchCluster(opts: { count: number; log: ShardLogKind; workers: number; workDir: string; org: string }): Promise<BenchCluster> {
  const stops: Array<() => Promise<void>> = [];
  const stop = async (): Promise<void> => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  };
  try {
    const etcd = await startEtcd();
    stops.push(() => etcd.stop());
    const nats = opts.log === 'jetstream' ? await startNats() : null;
    if (nats) stops.push(() => nats.stop());

    const seed = await mkdtemp(join(opts.workDir, 'cluster-seed-'));
    const key = await createOrgAndKey(seed, opts.org);
    const keyFile = join(seed, 'secret.key');
    const secretKey = existsSync(keyFile) ? (await readFile(keyFile, 'utf8')).trim() : randomBytes(32).toString('base64');
    const common = clusterSettings({ name: `bench${process.pid}`, etcd, nats, log: opts.log, secretKey, leaseTtlS: LEASE_TTL_S, rebalanceStableS: 3 });
    await promisify(execFile)(process.execPath, [SERVER_ENTRY, 'cluster', 'import-orgs', '--data', seed], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...common, ...CLI_NODE_SETTINGS },
    });

    const ports = await freePorts(opts.count * 2);
    const launches = new Map<string, number>();
    const launch = async (i: number): Promise<ClusterMember> => {
      const id = `n${i + 1}`;
      const dataDir = join(opts.workDir, `cluster-${id}`);
      if (!existsSync(dataDir)) await cp(seed, dataDir, { recursive: true });
      const port = ports[2 * i] as number;
      const env = { ...common, ...nodeSettings(id, port, ports[2 * i + 1] as number) };
      const launched = launches.get(id) ?? 0;
      launches.set(id, launched + 1);
      const logFile = join(opts.workDir, launched === 0 ? `cluster-${id}.log` : `cluster-${id}.restart-${launched}.log`);
      const server = await startRepohost({ dataDir, workers: opts.workers, logFile, port, env });
      stops.push(() => server.stop());
      return Object.assign(server, { id });
    };
    const nodes = await Promise.all(Array.from({ length: opts.count }, (_, i) => launch(i)));
    await settled(nodes, launch);
    return { nodes, key, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Every shard active on its owner, as every node sees it. A node that lost its lease while all
 * started (the machine is loaded) leaves with exit code 75 for its supervisor to start it again:
 * this is that supervisor.
 */
async function settled(nodes: ClusterMember[], launch: (i: number) => Promise<ClusterMember>): Promise<void> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  const live = new Set(nodes.map((n) => n.id));
  let last = '';
  while (Date.now() < deadline) {
    for (const [i, n] of nodes.entries()) if (n.exitCode() === LEASE_LOST_EXIT) nodes[i] = await launch(i);
    try {
      const statuses = await Promise.all(
        nodes.map(async (n) => (await (await fetch(`http://127.0.0.1:${n.metricsPort}/cluster/status`)).json()) as NodeStatus),
      );
      const reason = unsettledReason(statuses, live);
      if (reason === null) return;
      last = reason;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the cluster did not settle in ${SETTLE_TIMEOUT_MS} ms: ${last} (logs: ${nodes.map((n) => n.logFile).join(', ')})`);
}
