import type { NodeInfo, PlacementView } from '../placement.js';
import type { ServeGate } from './serve-gate.js';
import { noOwner, notServing } from './hop.js';

/** Where a shard is served, from this node's placement view: here, or on a live peer. */
export type ShardHome = { local: true } | { local: false; node: NodeInfo };

export class ShardOwners {
  constructor(
    readonly view: PlacementView,
    private readonly gate: ServeGate,
  ) {}

  get localId(): string {
    return this.view.localNodeId;
  }

  /** Whether this node owns the shard in its current view (whether it may serve it is `home`'s). */
  owns(shard: number): boolean {
    return this.view.shard(shard)?.owner === this.localId;
  }

  /** The shard's home; throws 503 when it has no live owner, or when it is ours but may not be served. */
  home(shard: number): ShardHome {
    const owner = this.view.shard(shard)?.owner;
    if (owner === undefined) throw noOwner(shard);
    if (owner === this.localId) {
      if (!this.gate.canServe(shard)) throw notServing(shard);
      return { local: true };
    }
    const node = this.view.node(owner);
    if (!node) throw noOwner(shard);
    return { local: false, node };
  }
}
