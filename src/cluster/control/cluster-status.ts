import type { Etcd3 } from 'etcd3';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { ShardPlacement } from '../placement.js';
import type { ControlKeys } from './keys.js';
import { decodeControllerRecord, decodeNodeRecord, decodePlacement, decodeProgress, type NodeProgress } from './records.js';

/**
 * `repohost cluster status`: one read of the control plane (nodes, their leases' remaining time,
 * drain requests, the controller, the placement table) and its rendering. Per-shard figures that
 * other parts of the cluster own (the log's position, for one) come in as extra columns, each a
 * ShardColumnSource, so this file needs no knowledge of them.
 */

export interface ShardColumnSource {
  name: string;
  /** The column's value for each shard it knows; a shard it does not is shown as '-'. */
  read(client: Etcd3, keys: ControlKeys, placement: Map<number, ShardPlacement>): Promise<Map<number, string | number>>;
}

export interface NodeStatus {
  id: string;
  url: string;
  internalUrl: string;
  lease: string;
  /** Seconds the lease has left (etcd's answer, whole seconds), or null if etcd did not say. */
  leaseRemainingS: number | null;
  leaseTtlS: number | null;
  draining: boolean;
  owns: number;
  follows: number;
}

export interface ShardStatus extends ShardPlacement {
  shard: number;
  [column: string]: unknown;
}

export interface ClusterStatus {
  cluster: string;
  controller: string | null;
  nodes: NodeStatus[];
  /** Drain requests of nodes that are not live. */
  drainingAbsent: string[];
  unplaced: number;
  shards: ShardStatus[];
}

/**
 * Followers' lag from the progress contract (records.ts): the largest lag any follower reports at
 * the shard's current epoch, or nothing when no follower reported.
 */
export const followerLagColumn: ShardColumnSource = {
  name: 'lag',
  async read(client, keys, placement) {
    const res = await client.getAll().prefix(keys.progress).exec();
    const reports = new Map<string, NodeProgress>();
    for (const kv of res.kvs) {
      const p = decodeProgress(kv.value.toString('utf8'));
      if (p) reports.set(kv.key.toString('utf8').slice(keys.progress.length), p);
    }
    const out = new Map<number, number>();
    for (const [shard, p] of placement) {
      const lags = p.followers.map((f) => reports.get(f)?.shards[String(shard)]).filter((r) => r?.epoch === p.epoch).map((r) => r!.lag);
      if (lags.length) out.set(shard, Math.max(...lags));
    }
    return out;
  },
};

export async function readClusterStatus(client: Etcd3, keys: ControlKeys, cluster: string, columns: ShardColumnSource[]): Promise<ClusterStatus> {
  const [nodesRes, placementRes, drainRes, controllerRaw] = await Promise.all([
    client.getAll().prefix(keys.nodes).exec(),
    client.getAll().prefix(keys.placement).exec(),
    client.getAll().prefix(keys.drain).keys(),
    client.get(keys.controller).string(),
  ]);
  const placement = new Map<number, ShardPlacement>();
  for (const kv of placementRes.kvs) {
    const shard = Number(kv.key.toString('utf8').slice(keys.placement.length));
    const p = decodePlacement(kv.value.toString('utf8'));
    if (p && Number.isInteger(shard) && shard >= 0 && shard < SHARD_COUNT) placement.set(shard, p);
  }
  const draining = new Set(drainRes.map((k) => k.slice(keys.drain.length)));
  const records = nodesRes.kvs.map((kv) => decodeNodeRecord(kv.value.toString('utf8'))).filter((r) => r !== undefined);
  const nodes = await Promise.all(
    records.map(async (r): Promise<NodeStatus> => {
      const ttl = await client.leaseClient.leaseTimeToLive({ ID: r.lease }).catch(() => null);
      const placed = [...placement.values()];
      return {
        id: r.id,
        url: r.url,
        internalUrl: r.internalUrl,
        lease: r.lease,
        leaseRemainingS: ttl ? Number(ttl.TTL) : null,
        leaseTtlS: ttl ? Number(ttl.grantedTTL) : null,
        draining: draining.has(r.id),
        owns: placed.filter((p) => p.owner === r.id).length,
        follows: placed.filter((p) => p.followers.includes(r.id)).length,
      };
    }),
  );
  const extra = await Promise.all(columns.map(async (c) => [c.name, await c.read(client, keys, placement)] as const));
  const shards = [...placement.entries()]
    .sort(([a], [b]) => a - b)
    .map(([shard, p]): ShardStatus => {
      const row: ShardStatus = { shard, ...p };
      for (const [name, values] of extra) row[name] = values.get(shard) ?? null;
      return row;
    });
  return {
    cluster,
    controller: controllerRaw === null ? null : (decodeControllerRecord(controllerRaw)?.id ?? null),
    nodes: nodes.sort((a, b) => (a.id < b.id ? -1 : 1)),
    drainingAbsent: [...draining].filter((id) => !records.some((r) => r.id === id)).sort(),
    unplaced: SHARD_COUNT - placement.size,
    shards,
  };
}

/**
 * The human form: the nodes, then the shards with consecutive shards of the same owner, epoch,
 * followers and extra values folded into one line (`12-14`).
 */
export function formatClusterStatus(status: ClusterStatus, columns: string[]): string {
  const lines = [`cluster ${status.cluster}: ${status.nodes.length} nodes, controller ${status.controller ?? '(none)'}, ${SHARD_COUNT - status.unplaced}/${SHARD_COUNT} shards placed`];
  lines.push(table(['node', 'lease', 'owns', 'follows', 'draining', 'url', 'internal'], status.nodes.map((n) => [
    n.id,
    n.leaseRemainingS === null ? 'unknown' : `${n.leaseRemainingS}/${n.leaseTtlS} s`,
    String(n.owns),
    String(n.follows),
    n.draining ? 'yes' : 'no',
    n.url,
    n.internalUrl,
  ])));
  if (status.drainingAbsent.length) lines.push(`drain requested for absent nodes: ${status.drainingAbsent.join(', ')}`);
  const rows: string[][] = [];
  let run: { from: number; to: number; cells: string[] } | null = null;
  const flush = (): void => {
    if (run) rows.push([run.from === run.to ? String(run.from) : `${run.from}-${run.to}`, ...run.cells]);
  };
  for (const s of status.shards) {
    const cells = [s.owner, String(s.epoch), s.followers.join(',') || '-', ...columns.map((c) => (s[c] === null || s[c] === undefined ? '-' : String(s[c] as string | number)))];
    if (run && run.to === s.shard - 1 && run.cells.join('\u0000') === cells.join('\u0000')) run.to = s.shard;
    else {
      flush();
      run = { from: s.shard, to: s.shard, cells };
    }
  }
  flush();
  lines.push(table(['shard', 'owner', 'epoch', 'followers', ...columns], rows));
  return lines.join('\n\n');
}

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [head, ...rows].map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
