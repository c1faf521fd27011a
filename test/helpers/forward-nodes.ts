import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { TEST_PLACEMENT_ENV, type FixedPlacementTable } from '../../src/cluster/forward/fixed-placement.js';
import { freePorts, startEtcd } from './cluster-engines.js';
import { createTestKey, startTestServer, type TestServer } from './server.js';

/**
 * Repohost processes in cluster mode whose placement is a fixed table per node (the test seam of
 * src/cluster/forward/fixed-placement.ts), for the forwarding tests. Every node starts from a copy
 * of one data directory holding the org and its admin key, as the org directory replicated
 * through etcd would give it. A node's table may disagree with another's: that is a stale route.
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
  const etcd = await startEtcd({ members: 1 });
  t.teardown(() => etcd.stop());
  const seed = mkdtempSync(join(tmpdir(), 'repohost-fwd-'));
  t.teardown(() => rmSync(seed, { recursive: true, force: true }));
  const storage = openStorage(seed);
  const orgId = createOrg(new LmdbOrgDirectory(storage), 'acme', 'acme inc').id;
  await storage.close();
  const key = createTestKey(seed, { scopes: ['admin'], name: 'test-admin', org: 'acme' });
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
        ...env,
        REPOHOST_CLUSTER_ETCD: etcd.endpoints.join(','),
        REPOHOST_SHARD_LOG: 'etcd',
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
  return started;
}

/** Every shard owned by one node, in every node's view. */
export const allOwnedBy = (id: string) => (): Record<string, string> => ({ default: id });
