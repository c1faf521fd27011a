/**
 * Where each of the 256 shards lives in a cluster. The controller writes one entry per shard to
 * etcd with compare-and-swap; every node watches the table and keeps it in memory, so routing
 * never waits on etcd.
 */
export interface ShardPlacement {
  /** Node id of the single writer. */
  owner: string;
  /** Raised by one at every ownership change; log records carry it, so a stale owner is visible. */
  epoch: number;
  /** Nodes that tail the shard's log into their own LMDB, ready to be promoted. */
  followers: string[];
}

/** A live node, as it registers itself under its etcd lease. */
export interface NodeInfo {
  id: string;
  /** Public URL: clients, and streamed uploads proxied from other nodes. */
  url: string;
  /** Listener for forwarded actor messages (HTTP/2). */
  internalUrl: string;
}

/** A node's in-memory view of the membership and the placement table. */
export interface PlacementView {
  readonly localNodeId: string;
  /** The shard's entry, or undefined before the controller placed it. */
  shard(shard: number): ShardPlacement | undefined;
  /** A live node by id, or undefined once its lease expired. */
  node(id: string): NodeInfo | undefined;
  nodes(): NodeInfo[];
  /** Called after each change of the table or the membership (placement entries that changed). */
  onChange(listener: (shards: number[]) => void): () => void;
}
