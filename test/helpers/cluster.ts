import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LEASE_LOST_EXIT, type NodeStatus } from '../../src/cluster/cluster-node.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import { TEST_PLACEMENT_ENV, type FixedPlacementTable } from '../../src/cluster/forward/fixed-placement.js';
import type { NodeInfo } from '../../src/cluster/placement.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { openStorage } from '../../src/storage/database.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { freePorts, startEtcd, startNats, type EngineCluster } from './cluster-engines.js';
import { CLI_NODE_SETTINGS, clusterSettings, nodeSettings, unsettledReason, type ShardLogKind } from './cluster-settings.js';
import type { ApiCall } from './history-recorder.js';
import type { NetLab, NetNode } from './netns.js';
import { createTestKey, runCli, startTestServer, type TestKey, type TestServer } from './server.js';

/**
 * A cluster of real repohost processes, the one way the tests start one: 3-member etcd (and
 * nats-server when the shard log is JetStream), then N nodes of the compiled CLI `serve` with the
 * cluster settings, each on its own data directory and ports, started together. With a network
 * lab, every node runs in its own namespace and the engines listen on the bridge, so a test can
 * cut a node off. With fixed placement tables (the forwarding tests' seam), each node routes by
 * its own table instead of the controller's placement.
 *
 * The org and its admin key are made in a seed directory and imported into etcd with the CLI
 * (`repohost cluster import-orgs`), as an operator would. What the harness reads from a node:
 * `GET /cluster/status` on its operator listener (`NodeStatus`: the node's lease and, per shard,
 * its replica state and the placement it sees).
 */

export type { ShardLogKind } from './cluster-settings.js';

export interface TestNode extends TestServer {
  id: string;
  /** The node's namespace when the cluster runs in a network lab. */
  net: NetNode | null;
  status(): Promise<NodeStatus>;
  /** SIGSTOP / SIGCONT: a stop-the-world pause. */
  pause(): void;
  resume(): void;
  /** The node's API as the history recorder calls it (token of the cluster's admin key). */
  call: ApiCall;
  alive(): boolean;
}

export interface ClusterOptions {
  log: ShardLogKind;
  /** Nodes started with the cluster (default 3), named n1, n2, … (with fixed tables: their ids). */
  count?: number;
  /**
   * REPOHOST_LEASE_TTL_S (default 10 s: on this shared machine shorter leases have lapsed while
   * a cluster started; settled() restarts such a node, as a supervisor would).
   */
  leaseTtlS?: number;
  /** REPOHOST_REBALANCE_STABLE_S (default 3 s: the nodes start together, the first placement takes them all). */
  rebalanceStableS?: number;
  /** More settings of every node and CLI call; they win over the ones above. */
  env?: Record<string, string>;
  /** Worker threads of each node (the test server's default otherwise). */
  workers?: number;
  lab?: NetLab;
  /**
   * Per node id, the node's own placement table (src/cluster/forward/fixed-placement.ts): the
   * `default` owner and per-shard exceptions, given the org's id. These ids are the nodes. Tables
   * may disagree, as views do while a placement change propagates. The controller still runs,
   * unheard.
   */
  fixedPlacement?: Record<string, (orgId: string) => Record<string, string>>;
  /** Where the nodes reach NATS instead of its members' endpoints (a proxy in between). */
  natsVia?: (nats: EngineCluster) => Promise<string[]>;
  /** Where one node reaches etcd instead of its members' endpoints (proxies in between); null: directly. */
  etcdVia?: (etcd: EngineCluster, nodeId: string) => Promise<string[] | null>;
}

export interface TestCluster {
  log: ShardLogKind;
  nodes: TestNode[];
  etcd: EngineCluster;
  nats: EngineCluster | null;
  org: string;
  key: TestKey;
  leaseTtlS: number;
  /** The settings every node and CLI call of this cluster shares. */
  env: Record<string, string>;
  /** Starts one more node (a join) with the next id; `env` adds to its settings. */
  addNode(o?: { env?: Record<string, string> }): Promise<TestNode>;
  /** Asks the controller to move every shard off `node` (the control plane's drain request). */
  drain(node: TestNode): Promise<void>;
  /**
   * Resolves once every shard is active on a live owner, as every live node of `among` (default:
   * all) sees it; with fixed tables, once every node serves the shards its own table gives it.
   * Meanwhile a node of `among` that exited on a lost lease is restarted (a killed one is not).
   */
  settled(timeoutMs?: number, among?: TestNode[]): Promise<void>;
  /**
   * Resolves once every shard's owner and followers are their rendezvous targets among the live
   * nodes not drained, as every live node sees it: no move is in progress.
   */
  balanced(timeoutMs?: number): Promise<void>;
  /** The node that owns `shard` by the placement `via` (default: the first live node) sees. */
  ownerOf(shard: number, via?: TestNode): Promise<TestNode>;
  live(): TestNode[];
}

type Teardown = { teardown(fn: () => Promise<void> | void): void };

/** How long a node stopping at teardown may take to write its coverage before it is killed. */
const COVERAGE_STOP_MS = 10_000;

/** Where a node listens before it starts. */
interface Slot {
  id: string;
  net: NetNode | null;
  host: string;
  port: number;
  internalPort: number;
}

/** Every shard owned by `id`, in the view of whichever node is given this table. */
export const allOwnedBy = (id: string) => (): Record<string, string> => ({ default: id });

const alive = (n: TestServer): boolean => n.process.exitCode === null && n.process.signalCode === null;

export async function startCluster(t: Teardown, opts: ClusterOptions): Promise<TestCluster> {
  const lab = opts.lab ?? null;
  const listenHost = lab?.hostAddress;
  const [etcd, nats] = await startEngines(t, opts.log === 'jetstream', listenHost);
  const leaseTtlS = opts.leaseTtlS ?? 10;
  const org = 'acme';
  const secretKey = randomBytes(32).toString('base64');
  const env: Record<string, string> = {
    ...clusterSettings({ name: `rh${process.pid}`, etcd, nats, log: opts.log, secretKey, leaseTtlS, rebalanceStableS: opts.rebalanceStableS ?? 3 }),
    ...(nats && opts.natsVia ? { REPOHOST_CLUSTER_NATS: (await opts.natsVia(nats)).join(',') } : {}),
    ...opts.env,
  };

  const seed = mkdtempSync(join(tmpdir(), 'repohost-cluster-seed-'));
  t.teardown(() => rmSync(seed, { recursive: true, force: true }));
  const storage = openStorage(seed);
  const orgId = createOrg(new LmdbOrgDirectory(storage), org, `${org} inc`).id;
  await storage.close();
  const key = createTestKey(seed, { scopes: ['admin'], name: 'test-admin', org });
  const imported = await runCli(['cluster', 'import-orgs', '--data', seed], { ...env, ...CLI_NODE_SETTINGS });
  if (imported.code !== 0) throw new Error(`import-orgs failed: ${imported.stderr}`);

  // Namespaces are made one at a time (the lab numbers them in order); ports are picked together.
  let labTurn: Promise<unknown> = Promise.resolve();
  const slots = async (ids: string[]): Promise<Slot[]> => {
    const ports = lab ? [] : await freePorts(2 * ids.length);
    return Promise.all(
      ids.map(async (id, i): Promise<Slot> => {
        if (!lab) return { id, net: null, host: '127.0.0.1', port: ports[2 * i]!, internalPort: ports[2 * i + 1]! };
        const net = labTurn.then(() => lab.addNode(id));
        labTurn = net.catch(() => undefined);
        // Inside its own namespace a node has every port to itself.
        const made = await net;
        return { id, net: made, host: made.address, port: 8080, internalPort: 9100 };
      }),
    );
  };

  const launch = async (slot: Slot, more: Record<string, string> = {}): Promise<TestNode> => {
    const { id, net, host, port } = slot;
    const etcdVia = opts.etcdVia && (await opts.etcdVia(etcd, id));
    const dataDir = mkdtempSync(join(tmpdir(), `repohost-node-${id}-`));
    const server = await startTestServer({
      dataDir,
      key,
      org,
      port,
      host,
      workers: opts.workers,
      spawnVia: net ? (command, args, o) => lab!.spawn(net, command, args, o) : undefined,
      env: { ...env, ...(etcdVia ? { REPOHOST_CLUSTER_ETCD: etcdVia.join(',') } : {}), ...nodeSettings(id, port, slot.internalPort, host), ...more },
    }).catch((err: unknown) => {
      rmSync(dataDir, { recursive: true, force: true });
      throw err;
    });
    t.teardown(async () => {
      if (process.env.REPLICA_DEBUG) for (const line of server.logs) if (/"level":"(warn|error)"/.test(line)) console.error(id, line.slice(0, 800));
      await server.kill().catch(() => undefined);
      server.cleanup();
    });
    return Object.assign(server, {
      id,
      net,
      async status(): Promise<NodeStatus> {
        // Bounded: a stopped node must not hold up a poll.
        const res = await fetch(server.metricsUrl!.replace(/\/metrics$/, '/cluster/status'), { signal: AbortSignal.timeout(5000) });
        if (res.status !== 200) throw new Error(`${id}: GET /cluster/status answered ${res.status}`);
        return (await res.json()) as NodeStatus;
      },
      pause: () => void server.process.kill('SIGSTOP'),
      resume: () => void server.process.kill('SIGCONT'),
      call: (...args: Parameters<ApiCall>) => server.api(...args),
      alive: () => alive(server),
    });
  };

  const fixed = opts.fixedPlacement ?? null;
  const ids = fixed ? Object.keys(fixed) : Array.from({ length: opts.count ?? 3 }, (_, i) => `n${i + 1}`);
  const first = await slots(ids);
  const tableEnv = (slot: Slot): Record<string, string> => {
    if (!fixed) return {};
    const nodes: NodeInfo[] = first.map((s) => ({ id: s.id, url: `http://${s.host}:${s.port}`, internalUrl: `http://${s.host}:${s.internalPort}` }));
    const table: FixedPlacementTable = { nodes, owners: fixed[slot.id]!(orgId) };
    const file = join(seed, `placement-${slot.id}.json`);
    writeFileSync(file, JSON.stringify(table));
    return { [TEST_PLACEMENT_ENV]: file };
  };
  const nodes: TestNode[] = await Promise.all(first.map((s) => launch(s, tableEnv(s))));
  // A killed node writes no coverage: with coverage on, the nodes are asked to stop, all at once,
  // before their own teardowns kill them (tap runs teardowns last added first).
  if (process.env.NODE_V8_COVERAGE) t.teardown(async () => void (await Promise.all(nodes.map((n) => Promise.race([n.stop(), sleep(COVERAGE_STOP_MS)])))));

  let named = nodes.length;
  const live = (): TestNode[] => nodes.filter(alive);
  const drained = new Set<string>();
  return {
    log: opts.log,
    nodes,
    etcd,
    nats,
    org,
    key,
    leaseTtlS,
    env,
    live,
    async addNode(o = {}) {
      const [slot] = await slots([`n${++named}`]);
      const node = await launch(slot!, o.env);
      nodes.push(node);
      return node;
    },
    async drain(node) {
      const { Etcd3 } = await import('etcd3');
      const { controlKeys } = await import('../../src/cluster/control/keys.js');
      const { requestDrain } = await import('../../src/cluster/control/drain.js');
      const client = new Etcd3({ hosts: etcd.endpoints, defaultCallOptions: () => ({ deadline: Date.now() + 1000 }) });
      try {
        await requestDrain(client, controlKeys(env.REPOHOST_CLUSTER_NAME!), node.id);
        drained.add(node.id);
      } finally {
        client.close();
      }
    },
    async settled(timeoutMs = 60_000, among = nodes) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      while (Date.now() < deadline) {
        try {
          for (const n of among) if (n.process.exitCode === LEASE_LOST_EXIT) await n.restart();
          const up = among.filter(alive);
          // A fixed table is never taken over: a node gone is a failure at once.
          if (up.length === 0 || (fixed && up.length < among.length)) break;
          // A node that does not answer is named, with its last lines, in the failure.
          const statuses = await Promise.all(
            up.map((n) =>
              n.status().catch((err: unknown) => {
                throw new Error(`${n.id} did not answer its status (${String(err)}):\n${n.logs.slice(-15).join('\n')}`);
              }),
            ),
          );
          const reason = fixed ? unservedOwnShards(statuses) : unsettledReason(statuses, new Set(up.map((n) => n.id)));
          if (reason === null) return;
          last = reason;
        } catch (err) {
          last = String(err);
        }
        await sleep(200);
      }
      const exited = among.filter((n) => !alive(n)).map((n) => `${n.id} exited (${n.process.exitCode ?? n.process.signalCode}):\n${n.logs.slice(-15).join('\n')}`);
      throw new Error(`the cluster did not settle in ${timeoutMs} ms: ${last}\n${exited.join('\n')}`);
    },
    async balanced(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      let moving = -1;
      while (Date.now() < deadline) {
        const eligible = live()
          .filter((n) => !drained.has(n.id))
          .map((n) => ({ id: n.id }));
        const statuses = await Promise.all(live().map((n) => n.status().catch(() => null)));
        const seen = statuses.filter((s): s is NodeStatus => s !== null);
        // A node that did not answer counts as not balanced (-1).
        moving = seen.length === statuses.length ? Math.max(0, ...seen.map((s) => unbalancedShards(s, eligible))) : -1;
        if (moving === 0) return;
        await sleep(250);
      }
      throw new Error(`the cluster did not balance in ${timeoutMs} ms: ${moving} shards off their targets`);
    },
    async ownerOf(shard, via = live()[0]) {
      const s = await via!.status();
      const owner = s.shards.find((r) => r.shard === shard)?.placement?.owner;
      const node = nodes.find((n) => n.id === owner);
      if (!node) throw new Error(`shard ${shard}: ${via!.id} places it on ${owner ?? 'no node'}, not a node of this cluster`);
      return node;
    },
  };
}

/** etcd, and nats-server when asked, started together; each is stopped at teardown even if the other failed. */
async function startEngines(t: Teardown, withNats: boolean, listenHost: string | undefined): Promise<[EngineCluster, EngineCluster | null]> {
  const started = await Promise.allSettled([startEtcd({ listenHost }), withNats ? startNats({ listenHost }) : Promise.resolve(null)]);
  for (const s of started) {
    if (s.status === 'fulfilled' && s.value) {
      const engine = s.value;
      t.teardown(() => engine.stop());
    }
  }
  const [etcd, nats] = started;
  if (etcd.status === 'rejected') throw etcd.reason;
  if (nats.status === 'rejected') throw nats.reason;
  return [etcd.value, nats.value];
}

/** With fixed tables: null once every node serves each shard its own table gives it. */
function unservedOwnShards(statuses: NodeStatus[]): string | null {
  const waiting = statuses
    .map((s) => ({ node: s.node, count: s.shards.filter((r) => r.placement?.owner === s.node && r.state !== 'active').length }))
    .filter((w) => w.count > 0);
  return waiting.length === 0 ? null : waiting.map((w) => `${w.node} still activates ${w.count} of its shards`).join('; ');
}

/** Shards whose placement, as `status` sees it, is not the rendezvous targets of `eligible`. */
function unbalancedShards(status: NodeStatus, eligible: Array<{ id: string }>): number {
  // The nodes keep the default REPOHOST_REPLICAS (3): an owner and two followers.
  const sorted = (ids: string[]): string => [...ids].sort().join();
  return status.shards.filter((r) => {
    const rank = rendezvousRank(eligible, r.shard);
    return !r.placement || r.placement.owner !== rank[0] || sorted(r.placement.followers) !== sorted(rank.slice(1, 3));
  }).length;
}
