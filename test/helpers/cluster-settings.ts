import type { NodeStatus } from '../../src/cluster/cluster-node.js';
import type { EngineCluster } from './cluster-engines.js';

/**
 * The environment of the members of a local cluster, shared by the cluster tests (cluster.ts),
 * `npm run cluster:dev` and `npm run bench -- --cluster N`: the settings every member shares, the
 * ones naming one node, and when every shard is served.
 */
export type ShardLogKind = 'etcd' | 'jetstream';

export interface ClusterSettingsOptions {
  name: string;
  etcd: EngineCluster;
  nats: EngineCluster | null;
  log: ShardLogKind;
  /** The cluster's key (REPOHOST_SECRET_KEY): every node decrypts the org directory's keys with it. */
  secretKey: string;
  leaseTtlS?: number;
  /** Nodes started together: the first placement waits until all have joined. */
  rebalanceStableS?: number;
}

export function clusterSettings(o: ClusterSettingsOptions): Record<string, string> {
  return {
    REPOHOST_CLUSTER_NAME: o.name,
    REPOHOST_CLUSTER_ETCD: o.etcd.endpoints.join(','),
    ...(o.nats ? { REPOHOST_CLUSTER_NATS: o.nats.endpoints.join(',') } : {}),
    REPOHOST_SHARD_LOG: o.log,
    REPOHOST_SECRET_KEY: o.secretKey,
    ...(o.leaseTtlS === undefined ? {} : { REPOHOST_LEASE_TTL_S: String(o.leaseTtlS) }),
    ...(o.rebalanceStableS === undefined ? {} : { REPOHOST_REBALANCE_STABLE_S: String(o.rebalanceStableS) }),
  };
}

/** The settings naming one node: its public and its internal (forwarding) port on `host`. */
export function nodeSettings(id: string, port: number, internalPort: number, host = '127.0.0.1'): Record<string, string> {
  return {
    REPOHOST_NODE_ID: id,
    REPOHOST_NODE_URL: `http://${host}:${port}`,
    REPOHOST_NODE_INTERNAL_URL: `http://${host}:${internalPort}`,
  };
}

/** The CLI reads the cluster settings as a node does; it registers nothing, so these are placeholders. */
export const CLI_NODE_SETTINGS: Record<string, string> = nodeSettings('cli', 1, 2);

/**
 * Null once every shard is active on its placed owner and every node places every shard on one of
 * `live`; otherwise what is still missing.
 */
export function unsettledReason(statuses: NodeStatus[], live: ReadonlySet<string>): string | null {
  const active = new Set<number>();
  for (const s of statuses) for (const r of s.shards) if (r.state === 'active' && r.placement?.owner === s.node) active.add(r.shard);
  const shards = statuses[0]?.shards.length ?? 0;
  const placed = statuses.every((s) => s.shards.every((r) => r.placement && live.has(r.placement.owner)));
  if (statuses.length > 0 && active.size === shards && placed) return null;
  return `${active.size}/${shards} shards active; every placement on a live node: ${placed}`;
}
