import type { Key } from 'lmdb';
import type { KeyRange } from '../storage/keys.js';
import type { RecordReader } from '../storage/read/record-cache.js';
import { firstOf } from '../storage/merge-ordered.js';
import { newestFirstAcross, type ListEntry } from '../storage/newest-first.js';
import type { Services } from './services.js';

/**
 * Reads of records on shards another node may own (cluster mode). An org-level read (a
 * listing, a restricted token's names) runs on the org shard's owner but needs records of every
 * listed repository, each on its own shard: `gather` fetches the given keys from their owners,
 * one request per node, all in parallel, and returns a reader answering them (and reading this
 * node's own shards directly). A list kept per shard (the org's sync runs) is read the same way:
 * `newest` asks each node for the first `limit` entries of its shards' lists, newest first,
 * strictly before the id `before`, and merges the answers.
 */
export interface ShardReads {
  gather(keys: Key[]): Promise<RecordReader>;
  newest(lists: KeyRange[], limit: number, before?: string): Promise<ListEntry[]>;
}

/**
 * A reader for `keys`: on a single node its own LMDB (every shard is there, and the keys are not
 * even listed), in a cluster what their owners hold.
 */
export function readerFor(services: Pick<Services, 'storage' | 'shardReads'>, keys: () => Key[]): RecordReader | Promise<RecordReader> {
  return services.shardReads ? services.shardReads.gather(keys()) : services.storage.meta;
}

/**
 * The first `limit` entries of `lists`, newest first, strictly before the id `before`: on a
 * single node from its own LMDB, in a cluster from the lists' owners (`ShardReads.newest`).
 */
export function newestOf(services: Pick<Services, 'storage' | 'shardReads'>, lists: KeyRange[], limit: number, before?: string): ListEntry[] | Promise<ListEntry[]> {
  return services.shardReads ? services.shardReads.newest(lists, limit, before) : firstOf(newestFirstAcross(services.storage.meta, lists, before), limit);
}
