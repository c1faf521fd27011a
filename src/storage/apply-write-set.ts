import { asBinary, type Database, type Key } from 'lmdb';
import { NESTABLE_COMMIT_THEN_SYNC } from './commit-flags.js';
import type { Storage } from './database.js';
import { encodeKey } from './keys.js';
import type { WriteDb, WriteSet } from './write-set.js';

/**
 * Applies `set`, a write set of the shard's log, in one transaction: a child of the caller's when
 * one is open (a follower applies many per commit, and records its position there:
 * replica-position.ts), its own otherwise. The ops write the exact bytes the owner stored. An op
 * whose key is outside the set's shard is refused (the whole set with it): a follower writes
 * nothing else.
 */
export function applyWriteSet(storage: Storage, set: WriteSet): void {
  const dbs: Record<WriteDb, Database<unknown, Key>> = { meta: storage.meta, objects: storage.objects, chunks: storage.chunks };
  const prefix = shardPrefix(set.shard);
  storage.root.transactionSync(() => {
    for (const op of set.ops) {
      if (!startsWith(op.key, prefix) || (op.end && !startsWith(op.end, prefix))) throw new Error(`write set of shard ${set.shard} has a key outside it`);
      const db = dbs[op.db];
      if (op.kind === 'put') db.putSync(op.key, asBinary(op.value!));
      else if (op.kind === 'del') db.removeSync(op.key);
      // The same keys as on the owner: the range holds here what it held there.
      else for (const key of [...db.getKeys({ start: op.key, end: op.end! })]) db.removeSync(key);
    }
  }, NESTABLE_COMMIT_THEN_SYNC);
}

/** The encoded start of every key of `shard`: its number, then the separator between key parts. */
function shardPrefix(shard: number): Uint8Array {
  const number = encodeKey([shard]);
  const prefix = new Uint8Array(number.length + 1);
  prefix.set(number);
  return prefix;
}

function startsWith(key: Uint8Array, prefix: Uint8Array): boolean {
  if (key.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (key[i] !== prefix[i]) return false;
  return true;
}
