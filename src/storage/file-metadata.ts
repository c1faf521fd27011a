import type { Database, Key } from 'lmdb';
import { K, MAX_KEY_BYTES, keyBytes } from './keys.js';
import { fileMetadata } from './read/content.js';

/** File metadata (`set_metadata`, API §5.4): current values per path, outside git history. */

/** The longest path (in bytes) metadata can be set on: the path is part of the record's key, which LMDB bounds. */
export function metadataPathRoom(repoId: string): number {
  return MAX_KEY_BYTES - keyBytes(K.fileMeta(repoId, '') as string[]);
}

/** Applies `values` to a path's metadata (null removes a name); a path left without any is removed. */
export function updateFileMetadata(meta: Database<unknown, Key>, repoId: string, path: string, values: Record<string, string | null>): void {
  const current = { ...(fileMetadata(meta, repoId, path) ?? {}) };
  for (const [k, v] of Object.entries(values)) {
    if (v === null) delete current[k];
    else current[k] = v;
  }
  const key = K.fileMeta(repoId, path);
  if (Object.keys(current).length === 0) meta.removeSync(key);
  else meta.putSync(key, current);
}
