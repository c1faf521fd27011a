/**
 * The control plane's etcd keys, all under `/rh/<cluster>/` so several clusters can share one
 * etcd. The layout and who writes each key are described in docs/design.md, "Cluster control
 * plane".
 */
export interface ControlKeys {
  /** `/rh/<cluster>/` */
  root: string;
  /** Prefix of the membership: `nodes/<id>` = NodeRecord, bound to the node's lease. */
  nodes: string;
  node(id: string): string;
  /** The elected controller's node id, bound to its lease. */
  controller: string;
  /** Prefix of the placement table: `placement/<shard>` = ShardPlacement. */
  placement: string;
  placementOf(shard: number): string;
  /** Prefix of drain requests: `drain/<id>` exists while node `id` is to be emptied. */
  drain: string;
  drainOf(id: string): string;
  /** Prefix of follower progress: `progress/<id>` = NodeProgress, bound to the node's lease. */
  progress: string;
  progressOf(id: string): string;
}

export function controlKeys(cluster: string): ControlKeys {
  const root = `/rh/${cluster}/`;
  return {
    root,
    nodes: `${root}nodes/`,
    node: (id) => `${root}nodes/${id}`,
    controller: `${root}controller`,
    placement: `${root}placement/`,
    placementOf: (shard) => `${root}placement/${shard}`,
    drain: `${root}drain/`,
    drainOf: (id) => `${root}drain/${id}`,
    progress: `${root}progress/`,
    progressOf: (id) => `${root}progress/${id}`,
  };
}
