import type { Etcd3 } from 'etcd3';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { NodeInfo, PlacementView, ShardPlacement } from '../placement.js';
import type { ControlKeys } from './keys.js';
import { PrefixCache } from './prefix-cache.js';
import { decodeNodeRecord, decodePlacement, type NodeRecord } from './records.js';

/**
 * A node's PlacementView on etcd: the membership (`nodes/`) and the placement table
 * (`placement/`) kept in memory by two watched prefix caches. Routing reads only this memory;
 * etcd is never on a request's path.
 */
export class EtcdPlacementView implements PlacementView {
  readonly nodesCache: PrefixCache<NodeRecord>;
  readonly placementCache: PrefixCache<ShardPlacement>;
  private readonly listeners = new Set<(shards: number[]) => void>();

  constructor(
    client: Etcd3,
    keys: ControlKeys,
    readonly localNodeId: string,
  ) {
    this.nodesCache = new PrefixCache(client, keys.nodes, decodeNodeRecord);
    this.placementCache = new PrefixCache(client, keys.placement, decodePlacement);
    this.nodesCache.onChange(() => this.emit([]));
    this.placementCache.onChange((names) => {
      const shards = names.map(Number).filter((s) => Number.isInteger(s) && s >= 0 && s < SHARD_COUNT);
      if (shards.length) this.emit(shards);
    });
  }

  /** Reads both prefixes and starts watching them. */
  async start(): Promise<void> {
    await Promise.all([this.nodesCache.start(), this.placementCache.start()]);
  }

  shard(shard: number): ShardPlacement | undefined {
    return this.placementCache.get(String(shard))?.value;
  }

  node(id: string): NodeInfo | undefined {
    return this.nodesCache.get(id)?.value;
  }

  nodes(): NodeInfo[] {
    return [...this.nodesCache.entriesNow()].map(([, v]) => v.value).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  onChange(listener: (shards: number[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.nodesCache.close();
    this.placementCache.close();
  }

  private emit(shards: number[]): void {
    for (const listener of this.listeners) listener(shards);
  }
}
