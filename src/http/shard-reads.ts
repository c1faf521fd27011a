import type { Key } from 'lmdb';
import type { RecordReader } from '../storage/read/record-cache.js';
import type { Services } from './services.js';

/**
 * Reads of records on shards another node may own (cluster mode). An org-level read (a
 * listing, a restricted token's names) runs on the org shard's owner but needs records of every
 * listed repository, each on its own shard: `gather` fetches the given keys from their owners,
 * one request per node, all in parallel, and returns a reader answering them (and reading this
 * node's own shards directly).
 */
export interface ShardReads {
  gather(keys: Key[]): Promise<RecordReader>;
}

/**
 * A reader for `keys`: on a single node its own LMDB (every shard is there, and the keys are not
 * even listed), in a cluster what their owners hold.
 */
export function readerFor(services: Pick<Services, 'storage' | 'shardReads'>, keys: () => Key[]): RecordReader | Promise<RecordReader> {
  return services.shardReads ? services.shardReads.gather(keys()) : services.storage.meta;
}
