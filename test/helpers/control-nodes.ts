import { startControlPlane, type ControlPlane } from '../../src/cluster/control/control-plane.js';
import type { ShardPlacement } from '../../src/cluster/placement.js';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { rendezvousRank } from '../../src/cluster/control/rendezvous.js';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Nodes of a control-plane test: each is a full control plane (own etcd client, own lease,
 * placement view, controller candidate) inside the test process. Their followers report
 * themselves caught up at once, standing in for the log tailer of a real node.
 *
 * Not `serve` processes (test/helpers/cluster.ts) on purpose: the control-plane tests watch what
 * no node process shows (each controller round's writes, each lease status change as it
 * happens, how long one etcd call takes), and a plane starts in a fraction of a second where a
 * node also starts a worker pool and activates its shards on a log.
 */
export interface ControlTestNode {
  id: string;
  plane: ControlPlane;
  /** Stops talking to etcd at once, without revoking or resigning: etcd sees a dead node. */
  crash(): Promise<void>;
}

export interface ControlTestSettings {
  cluster: string;
  etcd: string[];
  ttlS?: number;
  replicas?: number;
  maxMoves?: number;
  stableS?: number;
}

export async function startControlNode(settings: ControlTestSettings, id: string): Promise<ControlTestNode> {
  const plane = await startControlPlane(
    {
      name: settings.cluster,
      etcd: settings.etcd,
      nodeId: id,
      nodeUrl: `http://${id}.test:8080`,
      internalUrl: `http://${id}.test:9100`,
      leaseTtlS: settings.ttlS ?? 2,
      replicas: settings.replicas ?? 3,
      rebalanceMaxMoves: settings.maxMoves ?? 8,
      rebalanceStableS: settings.stableS ?? 0.5,
    },
    { roundMs: 100, progressIntervalMs: 100 },
  );
  const reportCaughtUp = (shards: number[]): void => {
    for (const shard of shards) {
      const p = plane.view.shard(shard);
      if (p && p.followers.includes(id)) plane.progress.report(shard, { epoch: p.epoch, applied: 0, lag: 0 });
      else plane.progress.forget(shard);
    }
  };
  const all = Array.from({ length: SHARD_COUNT }, (_, s) => s);
  reportCaughtUp(all);
  const unsubscribe = plane.view.onChange((shards) => reportCaughtUp(shards));
  let closed = false;
  return {
    id,
    plane,
    crash: async () => {
      if (closed) return;
      closed = true;
      unsubscribe();
      plane.client.close();
      plane.progress.close();
      await plane.controller.stop();
      plane.view.close();
      await plane.membership.leave();
    },
  };
}

/** Closes every node still running (a crashed one is already closed). */
export async function closeAll(nodes: ControlTestNode[]): Promise<void> {
  await Promise.all(nodes.map((n) => n.crash()));
}

/** Polls `check` every 50 ms until it returns a value, or throws after `ms` (with `explain()`, what stands then). */
export async function waitFor<T>(what: string, ms: number, check: () => T | undefined | false, explain?: () => string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${explain ? `: ${explain()}` : ''}`);
    await sleep(50);
  }
}

/** The whole table as one node sees it, or undefined while some shard is unplaced. */
export function fullTable(node: ControlTestNode): ShardPlacement[] | undefined {
  const table: ShardPlacement[] = [];
  for (let s = 0; s < SHARD_COUNT; s++) {
    const p = node.plane.view.shard(s);
    if (!p) return undefined;
    table.push(p);
  }
  return table;
}

/**
 * The table once every shard is on its rendezvous owner among `ids` with all its followers, or
 * undefined before: under load a node may join after the others' initial placement and get its
 * shards only by the moves that follow.
 */
export function settledTable(node: ControlTestNode, ids: string[], replicas = 3): ShardPlacement[] | undefined {
  const table = fullTable(node);
  const members = ids.map((id) => ({ id }));
  const want = Math.min(replicas, ids.length) - 1;
  return table?.every((p, s) => p.owner === rendezvousRank(members, s)[0] && p.followers.length === want) ? table : undefined;
}
