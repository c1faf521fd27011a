import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import type { NodeStatus } from '../../src/cluster/cluster-node.js';
import { freePorts, startEtcd, startNats, type EngineCluster } from './cluster-engines.js';
import { CLI_NODE_SETTINGS, clusterSettings, nodeSettings, unsettledReason } from './cluster-settings.js';
import { createTestKey, runCli, startTestServer, type TestKey, type TestServer } from './server.js';

/**
 * A real cluster of repohost processes for the replication tests: 3 etcd members, 3 nats-servers
 * when the log is JetStream, and `count` nodes with the control plane, the shard log and
 * replication. The org and its admin key are made in a seed directory and imported into etcd
 * (`repohost cluster import-orgs`), as an operator would.
 */
export interface ReplicaNode extends TestServer {
  id: string;
  status(): Promise<NodeStatus>;
}

export interface ReplicaCluster {
  nodes: ReplicaNode[];
  etcd: EngineCluster;
  nats: EngineCluster | null;
  key: TestKey;
  /** The settings every node shares (cluster name, engines, log backend). */
  settings: Record<string, string>;
  /** Resolves once every shard is active on its placed owner, as every live node sees it. */
  settled(timeoutMs?: number, live?: ReplicaNode[]): Promise<void>;
}

type Teardown = { teardown(fn: () => Promise<void> | void): void };

export interface ReplicaClusterOptions {
  log: 'etcd' | 'jetstream';
  count?: number;
  leaseTtlS?: number;
  env?: Record<string, string>;
  /** Where the nodes reach NATS instead of its members' endpoints (a proxy in between). */
  natsVia?: (nats: EngineCluster) => Promise<string[]>;
}

export async function startReplicaCluster(t: Teardown, opts: ReplicaClusterOptions): Promise<ReplicaCluster> {
  const count = opts.count ?? 3;
  const etcd = await startEtcd();
  t.teardown(() => etcd.stop());
  const nats = opts.log === 'jetstream' ? await startNats() : null;
  if (nats) t.teardown(() => nats.stop());
  const name = `rt${process.pid}`;

  const seed = mkdtempSync(join(tmpdir(), 'repohost-replica-seed-'));
  t.teardown(() => rmSync(seed, { recursive: true, force: true }));
  const storage = openStorage(seed);
  createOrg(new LmdbOrgDirectory(storage), 'acme', 'acme inc');
  await storage.close();
  const key = createTestKey(seed, { scopes: ['admin'], name: 'test-admin', org: 'acme' });
  const secretKey = randomBytes(32).toString('base64');
  const common: Record<string, string> = {
    ...clusterSettings({ name, etcd, nats, log: opts.log, secretKey, leaseTtlS: opts.leaseTtlS ?? 5, rebalanceStableS: 3 }),
    ...(nats && opts.natsVia ? { REPOHOST_CLUSTER_NATS: (await opts.natsVia(nats)).join(',') } : {}),
    ...opts.env,
  };
  const imported = await runCli(['cluster', 'import-orgs', '--data', seed], { ...common, ...CLI_NODE_SETTINGS });
  if (imported.code !== 0) throw new Error(`import-orgs failed: ${imported.stderr}`);

  const ports = await freePorts(count * 2);
  const nodes: ReplicaNode[] = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const id = `n${i + 1}`;
      const dataDir = mkdtempSync(join(tmpdir(), `repohost-replica-${id}-`));
      cpSync(seed, dataDir, { recursive: true });
      const server = await startTestServer({
        dataDir,
        key,
        port: ports[2 * i],
        env: { ...common, ...nodeSettings(id, ports[2 * i]!, ports[2 * i + 1]!) },
      });
      t.teardown(async () => {
        if (process.env.REPLICA_DEBUG) for (const line of server.logs) if (/"level":"(warn|error)"/.test(line)) console.error(id, line.slice(0, 800));
        await server.kill().catch(() => undefined);
        server.cleanup();
      });
      return replicaNode(server, id);
    }),
  );

  return { nodes, etcd, nats, key, settings: common, settled: (timeoutMs, live = nodes) => settleCluster(live, timeoutMs) };
}

/** A started server in cluster mode as a `ReplicaNode`: its id, and its `/cluster/status`. */
export function replicaNode(server: TestServer, id: string): ReplicaNode {
  return Object.assign(server, {
    id,
    async status(): Promise<NodeStatus> {
      const res = await fetch(server.metricsUrl!.replace(/\/metrics$/, '/cluster/status'));
      return (await res.json()) as NodeStatus;
    },
  });
}

/** Resolves once every shard is active on its placed owner, as every node of `live` sees it. */
export async function settleCluster(live: ReplicaNode[], timeoutMs = 45_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    // A node that lost its lease leaves (exit 75) for its supervisor to start it again: this
    // harness is that supervisor (on this loaded machine a lease can lapse while all start).
    for (const n of live) if (n.process.exitCode === 75) await n.restart().catch(() => undefined);
    try {
      const reason = unsettledReason(await Promise.all(live.map((n) => n.status())), new Set(live.map((n) => n.id)));
      if (reason === null) return;
      last = reason;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const dead = live.filter((n) => n.process.exitCode !== null || n.process.signalCode !== null);
  const logs = dead.map((n) => `${n.id} exited (${n.process.exitCode ?? n.process.signalCode}):\n${n.logs.slice(-15).join('\n')}`).join('\n');
  throw new Error(`cluster did not settle in ${timeoutMs} ms: ${last}\n${logs}`);
}
