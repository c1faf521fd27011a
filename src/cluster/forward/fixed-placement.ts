import { readFileSync } from 'node:fs';
import { SHARD_COUNT } from '../../actors/shard-map.js';
import type { NodeInfo, PlacementView, ShardPlacement } from '../placement.js';

/**
 * TEST SEAM ONLY: a placement read once from the JSON file named by REPOHOST_TEST_PLACEMENT, for
 * the forwarding tests of a cluster whose placement is not yet written by the etcd control plane.
 * It never changes and knows no epochs or followers; production placement is the control
 * plane's PlacementView. File: `{ "nodes": NodeInfo[], "owners": { "default": id, "<shard>": id } }`.
 */
export interface FixedPlacementTable {
  nodes: NodeInfo[];
  owners: Record<string, string>;
}

export const TEST_PLACEMENT_ENV = 'REPOHOST_TEST_PLACEMENT';

export function testPlacementView(localNodeId: string, env: NodeJS.ProcessEnv = process.env): PlacementView | null {
  const file = env[TEST_PLACEMENT_ENV];
  if (!file) return null;
  const table = JSON.parse(readFileSync(file, 'utf8')) as FixedPlacementTable;
  const shards: ShardPlacement[] = [];
  for (let s = 0; s < SHARD_COUNT; s++) shards.push({ owner: table.owners[String(s)] ?? table.owners.default!, epoch: 1, followers: [] });
  const nodes = new Map(table.nodes.map((n) => [n.id, n]));
  return {
    localNodeId,
    shard: (s) => shards[s],
    node: (id) => nodes.get(id),
    nodes: () => [...nodes.values()],
    onChange: () => () => undefined,
  };
}
