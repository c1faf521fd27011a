import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { TEST_PLACEMENT_ENV, type FixedPlacementTable } from '../../src/cluster/forward/fixed-placement.js';
import { freePorts, startEtcd } from './cluster-engines.js';
import { createTestKey, runCli, startTestServer, type TestServer } from './server.js';

/**
 * Repohost processes in cluster mode whose placement is a fixed table per node (the test seam of
 * src/cluster/forward/fixed-placement.ts), for the forwarding tests. The org and its admin key are
 * made in a seed directory and imported into etcd (`repohost cluster import-orgs`), as an
 * operator would; every node starts from a copy of the seed. The shard log is etcd's. A node's
 * table may disagree with another's: that is a stale route.
 */
export interface ForwardNode extends TestServer {
  id: string;
  internalUrl: string;
}

export interface NodeSpec {
  id: string;
  /** This node's view: `default` owner and per-shard exceptions (node ids), given the org's id. */
  owners: (orgId: string) => Record<string, string>;
}

export async function startForwardNodes(t: { teardown(fn: () => Promise<void> | void): void }, specs: NodeSpec[], env: Record<string, string> = {}): Promise<ForwardNode[]> {
  const etcd = await startEtcd();
  t.teardown(() => etcd.stop());
  const seed = mkdtempSync(join(tmpdir(), 'repohost-fwd-'));
  t.teardown(() => rmSync(seed, { recursive: true, force: true }));
  const storage = openStorage(seed);
  const orgId = createOrg(new LmdbOrgDirectory(storage), 'acme', 'acme inc').id;
  await storage.close();
  const key = createTestKey(seed, { scopes: ['admin'], name: 'test-admin', org: 'acme' });
  const common: Record<string, string> = {
    REPOHOST_CLUSTER_NAME: `fwd${process.pid}`,
    REPOHOST_CLUSTER_ETCD: etcd.endpoints.join(','),
    REPOHOST_SECRET_KEY: randomBytes(32).toString('base64'),
    REPOHOST_SHARD_LOG: 'etcd',
    // Generous: one node activating all 256 shards on a loaded machine must keep its lease.
    REPOHOST_LEASE_TTL_S: '10',
    ...env,
  };
  // The CLI reads the cluster settings as a node does; it registers nothing.
  const cliNode = { REPOHOST_NODE_ID: 'cli', REPOHOST_NODE_URL: 'http://127.0.0.1:1', REPOHOST_NODE_INTERNAL_URL: 'http://127.0.0.1:2' };
  const imported = await runCli(['cluster', 'import-orgs', '--data', seed], { ...common, ...cliNode });
  if (imported.code !== 0) throw new Error(`import-orgs failed: ${imported.stderr}`);
  const ports = await freePorts(specs.length * 2);
  const nodes = specs.map((s, i) => ({ id: s.id, url: `http://127.0.0.1:${ports[2 * i]}`, internalUrl: `http://127.0.0.1:${ports[2 * i + 1]}` }));
  const started: ForwardNode[] = [];
  for (const [i, spec] of specs.entries()) {
    const dataDir = mkdtempSync(join(tmpdir(), `repohost-fwd-${spec.id}-`));
    cpSync(seed, dataDir, { recursive: true });
    const table: FixedPlacementTable = { nodes, owners: spec.owners(orgId) };
    const tableFile = join(dataDir, '..', `placement-${spec.id}-${ports[2 * i]}.json`);
    writeFileSync(tableFile, JSON.stringify(table));
    t.teardown(() => rmSync(tableFile, { force: true }));
    const server = await startTestServer({
      dataDir,
      key,
      port: ports[2 * i],
      env: {
        ...common,
        REPOHOST_NODE_ID: spec.id,
        REPOHOST_NODE_URL: nodes[i]!.url,
        REPOHOST_NODE_INTERNAL_URL: nodes[i]!.internalUrl,
        [TEST_PLACEMENT_ENV]: tableFile,
      },
    });
    t.teardown(async () => {
      await server.stop();
      server.cleanup();
    });
    started.push(Object.assign(server, { id: spec.id, internalUrl: nodes[i]!.internalUrl }));
  }
  await Promise.all(started.map((n, i) => ownedShardsActive(n, owned(specs[i]!.owners(orgId), n.id))));
  return started;
}

/** How many of the 256 shards a table gives the node. */
function owned(owners: Record<string, string>, id: string): number {
  let count = 0;
  for (let s = 0; s < SHARD_COUNT; s++) if ((owners[String(s)] ?? owners.default) === id) count++;
  return count;
}

/** A shard's state as `/cluster/status` on the operator listener reports it. */
interface ShardStatus {
  shard: number;
  state: string;
  placement: { owner: string } | null;
}

/**
 * Waits until the node serves every shard its table gives it: with replication, an owner first
 * activates each shard on the shard log. A node without replication has no `/cluster/status`.
 */
async function ownedShardsActive(node: ForwardNode, owns: number, timeoutMs = 60_000): Promise<void> {
  const url = node.metricsUrl!.replace(/\/metrics$/, '/cluster/status');
  let waiting = -1;
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
    if (node.process.exitCode !== null || node.process.signalCode !== null) {
      throw new Error(`node ${node.id} exited (${node.process.exitCode ?? node.process.signalCode}):\n${node.logs.slice(-15).join('\n')}`);
    }
    const res = await fetch(url).catch(() => null);
    if (!res?.ok) continue;
    const { shards } = (await res.json()) as { shards: ShardStatus[] };
    waiting = owns - shards.filter((s) => s.placement?.owner === node.id && s.state === 'active').length;
    if (waiting === 0) return;
  }
  throw new Error(`node ${node.id} still activates ${waiting} of its shards after ${timeoutMs} ms`);
}

/** Every shard owned by one node, in every node's view. */
export const allOwnedBy = (id: string) => (): Record<string, string> => ({ default: id });
