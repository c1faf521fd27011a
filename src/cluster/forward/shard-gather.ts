import { deserialize, serialize } from 'node:v8';
import { performance } from 'node:perf_hooks';
import type { Database, Key } from 'lmdb';
import type { ReadFence } from '../../http/read-fence.js';
import type { ShardReads } from '../../http/shard-reads.js';
import { shardOfKey, type KeyRange } from '../../storage/keys.js';
import type { RecordReader } from '../../storage/read/record-cache.js';
import { firstOf, mergeOrdered } from '../../storage/merge-ordered.js';
import { newestFirstAcross, type ListEntry } from '../../storage/newest-first.js';
import { STALE_STATUS, decodeOutcome } from './actor-wire.js';
import type { ForwardMetrics } from './forward-metrics.js';
import { ownerUnreachable } from './hop.js';
import type { PeerSessions } from './peer-sessions.js';
import type { ShardOwners } from './shard-owners.js';

/** Where peers post the keys they read from this node's shards (actor-listener.ts). */
export const READ_PATH = '/read';
/** Where peers post the lists of this node's shards they read newest first (actor-listener.ts). */
export const LIST_PATH = '/list';
/** Keys, ranges and values travel as V8 structured clones: the records as LMDB decoded them, Buffers included. */
export const V8_CLONE = 'application/x-v8-serialized';

/**
 * A read of lists, each a range of one shard whose keys end in a time-ordered id: their first
 * `limit` entries, newest first across them, strictly before `before`.
 */
export interface ListRead {
  lists: KeyRange[];
  limit: number;
  before?: string;
}

/** Meta as the gathers read it: records by key, lists by range (through storage's readers). */
type Meta = Database<unknown, Key>;

/** The shard of a gathered key: only shard-owned records are gathered. */
function shardOfGathered(key: Key): number {
  const shard = shardOfKey(key);
  if (shard === null) throw new Error('a gathered key belongs to a shard');
  return shard;
}

/** The shard of a list: a range inside one shard. */
function shardOfList(list: KeyRange): number {
  const shard = shardOfGathered(list.start);
  if (shardOfGathered(list.end) !== shard) throw new Error('a gathered list lies inside one shard');
  return shard;
}

const idOf = (key: Key): string => JSON.stringify(key);

/**
 * The cluster's ShardReads: keys (and lists) of shards this node owns are read here when asked
 * for; the others are grouped by owner and fetched with one request per node, in parallel. An
 * owner that no longer owns a key's shard refuses the batch as a stale route (503 with
 * Retry-After for the client), so a listing never mixes in a copy that may be behind. A list read
 * asks each node for the first entries of its lists merged, and merges the nodes' answers. What
 * is read here is read at once and handed on once the shards' logs hold it (read-fence.ts); the
 * owners do the same with what they send.
 */
export class ShardGather implements ShardReads {
  constructor(
    private readonly meta: Meta,
    private readonly owners: ShardOwners,
    private readonly peers: PeerSessions,
    private readonly metrics: ForwardMetrics,
    private readonly fence: ReadFence,
  ) {}

  async gather(keys: Key[]): Promise<RecordReader> {
    const { local, remote } = this.byOwner(keys, shardOfGathered);
    const values = new Map<string, unknown>();
    for (const key of local) values.set(idOf(key), this.meta.get(key));
    await Promise.all([
      this.fence.made(local.map(shardOfGathered)),
      ...[...remote].map(async ([node, batch]) => {
        const fetched = (await this.fetch(node, batch.url, READ_PATH, batch.items)) as unknown[];
        batch.items.forEach((key, i) => values.set(idOf(key), fetched[i]));
      }),
    ]);
    return { get: (key: Key) => values.get(idOf(key)) };
  }

  async newest(lists: KeyRange[], limit: number, before?: string): Promise<ListEntry[]> {
    const { local, remote } = this.byOwner(lists, shardOfList);
    const here = firstOf(newestFirstAcross(this.meta, local, before), limit);
    const [answers] = await Promise.all([
      Promise.all([...remote].map(([node, batch]) => this.fetch(node, batch.url, LIST_PATH, { lists: batch.items, limit, before } satisfies ListRead) as Promise<ListEntry[]>)),
      this.fence.made(local.map(shardOfList)),
    ]);
    // Each node's answer is newest first: merged, they are the lists' first entries.
    return firstOf(mergeOrdered([here, ...answers], (entry) => entry.id, true), limit);
  }

  /** `items` of shards this node serves, and the others by the node that owns their shard (throws when one has no live owner). */
  private byOwner<T>(items: T[], shardOf: (item: T) => number): { local: T[]; remote: Map<string, { url: string; items: T[] }> } {
    const local: T[] = [];
    const remote = new Map<string, { url: string; items: T[] }>();
    for (const item of items) {
      const home = this.owners.home(shardOf(item));
      if (home.local) {
        local.push(item);
        continue;
      }
      let batch = remote.get(home.node.id);
      if (!batch) remote.set(home.node.id, (batch = { url: home.node.internalUrl, items: [] }));
      batch.items.push(item);
    }
    return { local, remote };
  }

  private async fetch(node: string, url: string, path: string, request: unknown): Promise<unknown> {
    const started = performance.now();
    let answer;
    try {
      answer = await this.peers.post(url, path, { 'content-type': V8_CLONE }, serialize(request));
    } catch {
      this.metrics.observe('read', 'unreachable', 0);
      throw ownerUnreachable(node);
    }
    if (answer.status === 200) {
      this.metrics.observe('read', 'answered', (performance.now() - started) / 1000);
      return deserialize(answer.body) as unknown;
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

/** The first of `shards` this node does not own; throws when it owns one it may not serve now. */
function firstNotOwned(owners: ShardOwners, shards: Iterable<number>): number | null {
  for (const shard of shards) {
    if (!owners.owns(shard)) return shard;
    owners.home(shard); // throws when this node may not serve it now
  }
  return null;
}

/** What an owner read for a peer: the values and the shards they are of, or the first shard it does not own. */
export type OwnRead<T> = { values: T; shards: number[] } | { notOwned: number };

/** The owner's side: the values of keys of shards it owns and serves, or the first shard it does not own. */
export function readOwnKeys(meta: RecordReader, owners: ShardOwners, keys: Key[]): OwnRead<unknown[]> {
  const shards = keys.map(shardOfGathered);
  const notOwned = firstNotOwned(owners, shards);
  return notOwned === null ? { values: keys.map((key) => meta.get(key)), shards } : { notOwned };
}

/** The owner's side of a list read: the entries, all of shards it owns and serves, or the first shard it does not own. */
export function readOwnLists(meta: Meta, owners: ShardOwners, read: ListRead): OwnRead<ListEntry[]> {
  const shards = read.lists.map(shardOfList);
  const notOwned = firstNotOwned(owners, shards);
  return notOwned === null ? { values: firstOf(newestFirstAcross(meta, read.lists, read.before), read.limit), shards } : { notOwned };
}
