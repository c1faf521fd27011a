import type { Registry } from 'prom-client';
import type { ActorRuntime } from '../actors/runtime.js';
import type { ClusterConfig } from '../config.js';
import { log } from '../log.js';
import type { Storage } from '../storage/database.js';
import type { RecordCache } from '../storage/read/record-cache.js';
import { startControlPlane, type ControlPlane } from './control/control-plane.js';
import { registerControlPlaneMetrics } from './control/control-metrics.js';
import type { LeaseState } from './control/membership.js';
import { startForwarding, type Forwarding } from './forward/start.js';
import type { ServeGate } from './forward/serve-gate.js';
import { openShardLog } from './log/open-shard-log.js';
import { testPlacementView } from './forward/fixed-placement.js';
import type { NodeInfo, ShardPlacement } from './placement.js';
import { NodeReplicas } from './replica/node-replicas.js';
import { AcknowledgedReads } from './replica/acknowledged-reads.js';
import type { ReadFence } from '../http/read-fence.js';
import { ReplicaMetrics } from './replica/replica-metrics.js';
import type { ShardReport } from './replica/replica-report.js';
import { ShardSeeder } from './replica/shard-seeder.js';
import { logTrimFloor } from './replica/log-trim.js';

/** How often followers look at their log's end, the node reports its shards' progress and owners trim their logs. */
const PROGRESS_INTERVAL_MS = 1000;

/** Exit status of a node that lost its lease: its supervisor starts it again, as a new member. */
export const LEASE_LOST_EXIT = 75;

/** What `GET /cluster/status` on the operator listener answers. */
export interface NodeStatus {
  node: string;
  lease: LeaseState;
  controller: boolean;
  nodes: NodeInfo[];
  shards: Array<ShardReport & { placement: ShardPlacement | null }>;
}

/** A running cluster node: the parts the server uses, and their shutdown. */
export interface ClusterNode {
  gate: ServeGate;
  /** The front end's reads of shards served here are answered once their logs hold them. */
  readFence: ReadFence;
  forwarding: Forwarding;
  status(): NodeStatus;
  close(): Promise<void>;
}

export interface ClusterNodeParts {
  cluster: ClusterConfig;
  /** The data directory's storage as opened (not the recording view): the log is applied through it. */
  storage: Storage;
  /** The data directory: shard copies taken from peers are received into it. */
  dataDir: string;
  runtime: ActorRuntime;
  records: RecordCache;
  registry: Registry;
  /** Told the shards served here after each change (the webhook actor drains only those). */
  onServed(shards: number[]): void;
  /** Called once when the lease is lost for good: the node must leave (exit LEASE_LOST_EXIT). */
  onLeaseLost(): void;
}

/**
 * Starts cluster mode on a server: the shard log client, the control plane (placement view,
 * membership lease, controller candidate), every shard's replica, and forwarding. A shard is
 * served here only while its replica is active AND the node's lease is confirmed; a node whose
 * lease is lost for good leaves (`onLeaseLost`), since the controller may already have moved its
 * shards. This module (and through it the etcd and NATS clients) is imported only in cluster mode.
 */
export async function startClusterNode(parts: ClusterNodeParts): Promise<ClusterNode> {
  const { cluster, storage, records } = parts;
  const shardLog = await openShardLog(cluster);
  let control: ControlPlane;
  try {
    control = await startControlPlane(cluster);
  } catch (err) {
    await shardLog.close();
    throw err;
  }
  // The forwarding tests' fixed table (a test seam) stands in for the controller's placement.
  const view = testPlacementView(cluster.nodeId) ?? control.view;
  let metrics: ReplicaMetrics | null = null;
  const served = new Set<number>();
  parts.onServed([]);
  const seeder = new ShardSeeder(storage, view, parts.dataDir, cluster.leaseTtlS * 1000);
  const replicas = new NodeReplicas({
    storage,
    log: shardLog,
    view,
    seed: (shard) => seeder.seed(shard),
    trimEvery: cluster.logTrimEntries,
    unknownDeadlineMs: cluster.leaseTtlS * 1000,
    onActiveChange: (shard, active) => {
      if (active) served.add(shard);
      else served.delete(shard);
      parts.onServed([...served]);
      // Records cached while the shard was served, or a read snapshot from before the log's
      // entries were applied, must not be served once it is (again).
      records.dropAll();
      storage.root.resetReadTxn();
    },
    appended: (ms) => metrics?.appendSeconds.observe(ms / 1000),
    refused: () => metrics?.refusals.inc(),
  });
  metrics = new ReplicaMetrics(parts.registry, () => replicas.reports());
  registerControlPlaneMetrics(parts.registry, control);
  replicas.start();
  const stopLeaseWatch = control.membership.onStatus((status) => {
    if (status !== 'lost') return;
    log.error('cluster lease lost: leaving so that the moved shards are not served here', { node: cluster.nodeId });
    // Nothing is served from here on (mayServe is false); leaving waits for a disk sync first.
    void replicas.syncSettled(1000).then(() => parts.onLeaseLost());
  });
  const gate: ServeGate = {
    canServe: (shard) => {
      if (replicas.active(shard)) return control.membership.mayServe();
      // A request waits for a shard placed here: its activation goes ahead of the others queued.
      replicas.demand(shard);
      return false;
    },
  };

  let reporting = true;
  const progressLoop = (async () => {
    while (reporting) {
      await new Promise((r) => setTimeout(r, PROGRESS_INTERVAL_MS));
      if (!reporting) break;
      await replicas.probe();
      const reports = await replicas.durableReports().catch((err: unknown) => {
        log.warn('the data directory could not be synced: progress not reported this round', { err });
        return [];
      });
      for (const r of reports) {
        if (r.role === 'none') control.progress.forget(r.shard);
        else control.progress.report(r.shard, { epoch: view.shard(r.shard)?.epoch ?? 0, applied: r.applied, lag: r.lag });
      }
      await replicas.trimLogs((shard) => logTrimFloor(view, (node, s) => control.controller.progressOf(node, s), shard));
    }
  })();

  const readFence = new AcknowledgedReads(storage, replicas);
  const forwarding = await startForwarding({ cluster, runtime: parts.runtime, records, storage, registry: parts.registry, view, gate, fence: readFence });
  return {
    gate,
    readFence,
    forwarding,
    status: () => ({
      node: cluster.nodeId,
      lease: control.membership.state(),
      controller: control.controller.isLeader(),
      nodes: view.nodes(),
      shards: replicas.reports().map((r) => ({ ...r, placement: view.shard(r.shard) ?? null })),
    }),
    async close() {
      reporting = false;
      stopLeaseWatch();
      await forwarding.close();
      await progressLoop;
      await replicas.close();
      seeder.close();
      await control.close();
    },
  };
}
