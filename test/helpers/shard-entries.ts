import type { Key } from 'lmdb';
import type { Storage } from '../../src/storage/database.js';
import { Ranges } from '../../src/storage/keys.js';

/** Every entry of a shard's ranges, as stored bytes: `db key` → value hex (to compare two copies). */
export function shardEntries(storage: Storage, shard: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of ['meta', 'objects', 'chunks']) {
    const db = storage.root.openDB<Buffer, Key>({ name, encoding: 'binary' });
    for (const { key, value } of db.getRange(Ranges.shard(shard))) out.set(`${name} ${JSON.stringify(key)}`, value.toString('hex'));
  }
  return out;
}
