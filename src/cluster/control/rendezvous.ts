import { createHash } from 'node:crypto';

/**
 * Weighted rendezvous (highest-random-weight) hashing: each node draws a score for each shard
 * from a hash of the pair, and the shard's preferred nodes are the highest scores. Adding or
 * removing a node changes only the shards that node wins or held, so a membership change moves
 * about 1/N of the shards and nothing else. The score −w / ln(u), u uniform in (0, 1), gives a
 * node of weight w a share of w / Σw.
 */
export interface WeightedNode {
  id: string;
  weight?: number;
}

function unitHash(node: string, shard: number): number {
  const digest = createHash('sha256').update(`${node}\u0000${shard}`).digest();
  // 52 bits fit a double exactly; + 0.5 keeps u strictly inside (0, 1).
  const high = digest.readUInt32BE(0) >>> 12;
  const low = digest.readUInt32BE(4);
  return (high * 2 ** 32 + low + 0.5) / 2 ** 52;
}

export function rendezvousScore(node: WeightedNode, shard: number): number {
  return -(node.weight ?? 1) / Math.log(unitHash(node.id, shard));
}

/** The node ids ordered from most to least preferred for `shard`. */
export function rendezvousRank(nodes: WeightedNode[], shard: number): string[] {
  return nodes
    .map((n) => ({ id: n.id, score: rendezvousScore(n, shard) }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
    .map((n) => n.id);
}
