import { deserialize, serialize } from 'node:v8';
import { performance } from 'node:perf_hooks';
import type { Key } from 'lmdb';
import type { ShardReads } from '../../http/shard-reads.js';
import type { RecordReader } from '../../storage/read/record-cache.js';
import { shardOfKey } from '../../storage/keys.js';
import { STALE_STATUS, decodeOutcome } from './actor-wire.js';
import type { ForwardMetrics } from './forward-metrics.js';
import { ownerUnreachable } from './hop.js';
import type { PeerSessions } from './peer-sessions.js';
import type { ShardOwners } from './shard-owners.js';

/** Where peers post the keys they read from this node's shards (actor-listener.ts). */
export const READ_PATH = '/read';
/** Keys and values travel as V8 structured clones: the records as LMDB decoded them, Buffers included. */
export const V8_CLONE = 'application/x-v8-serialized';

/** A key's shard: the first part of every shard-owned key (storage/keys.ts). */
/** The shard of a gathered key: only shard-owned records are gathered. */
function shardOfGathered(key: Key): number {
  const shard = shardOfKey(key);
  if (shard === null) throw new Error('a gathered key belongs to a shard');
  return shard;
}

const idOf = (key: Key): string => JSON.stringify(key);

/**
 * The cluster's ShardReads: keys of shards this node owns are read here when asked for; the
 * others are grouped by owner and fetched with one request per node, in parallel. An owner that
 * no longer owns a key's shard refuses the batch as a stale route (503 with Retry-After for the
 * client), so a listing never mixes in a copy that may be behind.
 */
export class ShardGather implements ShardReads {
  constructor(
    private readonly meta: RecordReader,
    private readonly owners: ShardOwners,
    private readonly peers: PeerSessions,
    private readonly metrics: ForwardMetrics,
  ) {}

  async gather(keys: Key[]): Promise<RecordReader> {
    const byNode = new Map<string, { url: string; keys: Key[] }>();
    const local = new Set<number>();
    for (const key of keys) {
      const shard = shardOfGathered(key);
      const home = this.owners.home(shard);
      if (home.local) {
        local.add(shard);
        continue;
      }
      let batch = byNode.get(home.node.id);
      if (!batch) byNode.set(home.node.id, (batch = { url: home.node.internalUrl, keys: [] }));
      batch.keys.push(key);
    }
    const fetched = new Map<string, unknown>();
    await Promise.all(
      [...byNode].map(async ([node, batch]) => {
        const values = await this.fetch(node, batch.url, batch.keys);
        batch.keys.forEach((key, i) => fetched.set(idOf(key), values[i]));
      }),
    );
    const { meta } = this;
    return { get: (key: Key) => (local.has(shardOfGathered(key)) ? meta.get(key) : fetched.get(idOf(key))) };
  }

  private async fetch(node: string, url: string, keys: Key[]): Promise<unknown[]> {
    const started = performance.now();
    let answer;
    try {
      answer = await this.peers.post(url, READ_PATH, { 'content-type': V8_CLONE }, serialize(keys));
    } catch {
      this.metrics.observe('read', 'unreachable', 0);
      throw ownerUnreachable(node);
    }
    if (answer.status === 200) {
      this.metrics.observe('read', 'answered', (performance.now() - started) / 1000);
      return deserialize(answer.body) as unknown[];
    }
    if (answer.status !== STALE_STATUS && answer.status !== 503) {
      this.metrics.observe('read', 'unreachable', 0);
      throw ownerUnreachable(node);
    }
    this.metrics.observe('read', answer.status === STALE_STATUS ? 'stale_route' : 'answered', (performance.now() - started) / 1000);
    decodeOutcome(answer.body); // throws the owner's refusal
    throw ownerUnreachable(node);
  }
}

/** The owner's side: the values of keys of shards it owns and serves, or the first shard it does not own. */
export function readOwnKeys(meta: RecordReader, owners: ShardOwners, keys: Key[]): { values: unknown[] } | { notOwned: number } {
  for (const key of keys) {
    const shard = shardOfGathered(key);
    if (!owners.owns(shard)) return { notOwned: shard };
    owners.home(shard); // throws when this node may not serve it now
  }
  return { values: keys.map((key) => meta.get(key)) };
}
