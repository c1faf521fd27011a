import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes, createPrivateKey } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { LEASE_LOST_EXIT, type NodeStatus } from '../../src/cluster/cluster-node.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import { freePorts, startEtcd, startNats, type EngineCluster } from './cluster-engines.js';
import { CLI_NODE_SETTINGS, clusterSettings, nodeSettings, unsettledReason, type ShardLogKind } from './cluster-settings.js';
import type { NetLab, NetNode } from './netns.js';
import { runCli, startTestServer, type TestKey, type TestServer } from './server.js';
import type { ApiCall } from './history-recorder.js';

/**
 * A cluster of real repohost processes for the fault scenarios: 3-member etcd (and nats-server
 * when the shard log is JetStream), then N nodes of the compiled CLI `serve` with the cluster
 * settings, each on its own data directory and ports. With a network lab, every node runs in its
 * own namespace and the engines listen on the bridge, so the scenario can cut a node off.
 *
 * The org and its admin key are made with the CLI under the cluster's settings, so they land in
 * whatever stores the cluster's directory (etcd). What the harness reads from a node:
 * `GET /cluster/status` on its operator listener (`NodeStatus`: the node's lease and, per shard,
 * its replica state and the placement it sees).
 */

export type { ShardLogKind } from './cluster-settings.js';

export interface FaultNode extends TestServer {
  id: string;
  /** The node's namespace when the cluster runs in a network lab. */
  net: NetNode | null;
  status(): Promise<NodeStatus>;
  /** SIGKILL, and wait for the exit. */
  kill9(): Promise<void>;
  /** SIGSTOP / SIGCONT: a stop-the-world pause. */
  pause(): void;
  resume(): void;
  /** Starts a killed or stopped node again on its data directory, ports and id. */
  restartNode(): Promise<void>;
  /** The node's API as the history recorder calls it (token of the cluster's admin key). */
  call: ApiCall;
  alive(): boolean;
}

export interface FaultCluster {
  log: ShardLogKind;
  nodes: FaultNode[];
  etcd: EngineCluster;
  nats: EngineCluster | null;
  org: string;
  key: TestKey;
  leaseTtlS: number;
  /** The settings every node and CLI call of this cluster shares. */
  env: Record<string, string>;
  /** Starts one more node (join); it has the next id. */
  addNode(): Promise<FaultNode>;
  /** Asks the controller to move every shard off `node` (the control plane's drain request). */
  drain(node: FaultNode): Promise<void>;
  /**
   * Resolves once every shard is active on a live owner, as every live node sees it. Meanwhile a
   * node that exited on a lost lease is restarted (a killed one is not).
   */
  settled(timeoutMs?: number): Promise<void>;
  /**
   * Resolves once every shard's owner and followers are their rendezvous targets among the live
   * nodes not drained, as every live node sees it: no move is in progress.
   */
  balanced(timeoutMs?: number): Promise<void>;
  /** The node that owns `shard`, by the placement the first live node sees. */
  ownerOf(shard: number): Promise<FaultNode | undefined>;
  live(): FaultNode[];
}

type Teardown = { teardown(fn: () => Promise<void> | void): void };

/** Why cluster scenarios cannot run here, or null when they can. */
export function clusterUnavailable(): string | null {
  if (process.env.REPOHOST_CLUSTER_FAULTS !== '1') return 'cluster fault scenarios run with REPOHOST_CLUSTER_FAULTS=1';
  const node = fileURLToPath(new URL('../../src/cluster/cluster-node.js', import.meta.url));
  if (!existsSync(node)) return 'this build has no cluster mode (src/cluster/cluster-node.ts)';
  return null;
}

export async function startFaultCluster(t: Teardown, opts: { log: ShardLogKind; count?: number; leaseTtlS?: number; lab?: NetLab; env?: Record<string, string> }): Promise<FaultCluster> {
  const lab = opts.lab ?? null;
  const listenHost = lab?.hostAddress;
  const etcd = await startEtcd({ listenHost });
  t.teardown(() => etcd.stop());
  const nats = opts.log === 'jetstream' ? await startNats({ listenHost }) : null;
  if (nats) t.teardown(() => nats.stop());
  // The design's default. On this shared 2-core machine a start has lost 5 s leases to scheduling
  // stalls: settled() restarts such a node, as a supervisor would.
  const leaseTtlS = opts.leaseTtlS ?? 5;
  const org = 'acme';
  const env: Record<string, string> = {
    ...clusterSettings({ name: `f${process.pid}`, etcd, nats, log: opts.log, secretKey: randomBytes(32).toString('base64'), leaseTtlS, rebalanceStableS: 1 }),
    REPOHOST_REBALANCE_MAX_MOVES: '256',
    ...opts.env,
  };

  // The org and the admin key, written through the cluster's directory by the CLI.
  const seed = mkdtempSync(join(tmpdir(), 'repohost-fault-seed-'));
  t.teardown(() => rmSync(seed, { recursive: true, force: true }));
  const cliEnv = { ...env, ...CLI_NODE_SETTINGS };
  const orgMade = await runCli(['org', 'create', org, '--data', seed], cliEnv);
  if (orgMade.code !== 0) throw new Error(`org create: ${orgMade.stderr}`);
  const keyMade = await runCli(['key', 'create', '--org', org, '--scopes', 'admin', '--name', 'fault-admin', '--json', '--data', seed], cliEnv);
  if (keyMade.code !== 0) throw new Error(`key create: ${keyMade.stderr}`);
  const k = JSON.parse(keyMade.stdout) as { id: string; private_key_pem: string; public_key_jwk: { x: string } };
  const key: TestKey = { id: k.id, privateKey: createPrivateKey(k.private_key_pem), publicX: k.public_key_jwk.x };

  const nodes: FaultNode[] = [];
  const startNode = async (): Promise<FaultNode> => {
    const id = `n${nodes.length + 1}`;
    const net = lab ? await lab.addNode(id) : null;
    // Inside its own namespace a node has every port to itself.
    const [port, internal] = net ? [8080, 9100] : ((await freePorts(2)) as [number, number]);
    const host = net ? net.address : '127.0.0.1';
    const dataDir = mkdtempSync(join(tmpdir(), `repohost-fault-${id}-`));
    const server = await startTestServer({
      dataDir,
      key,
      org,
      port,
      host,
      spawnVia: net ? (command, args, o) => lab!.spawn(net, command, args, o) : undefined,
      env: { ...env, ...nodeSettings(id, port, internal, host) },
    });
    t.teardown(async () => {
      await server.kill().catch(() => undefined);
      server.cleanup();
    });
    const node: FaultNode = Object.assign(server, {
      id,
      net,
      async status(): Promise<NodeStatus> {
        const res = await fetch(server.metricsUrl!.replace(/\/metrics$/, '/cluster/status'), { signal: AbortSignal.timeout(2000) });
        if (res.status !== 200) throw new Error(`${id}: GET /cluster/status answered ${res.status}`);
        return (await res.json()) as NodeStatus;
      },
      kill9: () => server.kill(),
      pause: () => void server.process.kill('SIGSTOP'),
      resume: () => void server.process.kill('SIGCONT'),
      restartNode: async () => {
        await server.kill();
        await server.restart();
      },
      call: (...args: Parameters<ApiCall>) => server.api(...args),
      alive: () => server.process.exitCode === null && server.process.signalCode === null,
    });
    nodes.push(node);
    return node;
  };
  for (let i = 0; i < (opts.count ?? 3); i++) await startNode();

  const live = (): FaultNode[] => nodes.filter((n) => n.alive());
  const drained = new Set<string>();
  const cluster: FaultCluster = {
    log: opts.log,
    nodes,
    etcd,
    nats,
    org,
    key,
    leaseTtlS,
    env,
    addNode: startNode,
    live,
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
    async settled(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      while (Date.now() < deadline) {
        try {
          // A node that left on a lost lease is started again, as its supervisor would.
          for (const n of nodes) if (n.process.exitCode === LEASE_LOST_EXIT) await n.restartNode();
          const up = live();
          if (up.length === 0) throw new Error(`every node exited:\n${nodes.map((n) => `${n.id}: ${n.logs.slice(-3).join('\n')}`).join('\n')}`);
          const reason = unsettledReason(await Promise.all(up.map((n) => n.status())), new Set(up.map((n) => n.id)));
          if (reason === null) return;
          last = reason;
        } catch (err) {
          last = String(err);
          if (live().length === 0) break;
        }
        await sleep(200);
      }
      throw new Error(`the cluster did not settle in ${timeoutMs} ms: ${last}`);
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
    async ownerOf(shard) {
      const s = await live()[0]!.status();
      const owner = s.shards.find((r) => r.shard === shard)?.placement?.owner;
      return nodes.find((n) => n.id === owner);
    },
  };
  return cluster;
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
