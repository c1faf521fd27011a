/**
 * The JSON of `GET …/content` (API §7) for a path of a change's materialized view: a file or
 * symlink with its bytes in base64, or a directory listing with deeper levels as extra rows.
 * Pure reads of LMDB; the route decides which thread runs them (cheap ones on the front end).
 */
import type { Database, Key } from 'lmdb';
import { ServiceError } from '../../errors.js';
import { TREE_MODE, readBlob, type TreeValue } from '../../vcs/git-object.js';
import { normalizePath } from '../../vcs/paths.js';
import type { Storage } from '../database.js';
import { K, lastPart } from '../keys.js';
import type { FileMetadataRecord } from '../records.js';
import type { ChangeView } from './change-view.js';
import { cachedLookup, cachedWalk, treeEntryCount } from './tree-index.js';
import type { RecordReader } from './record-cache.js';

export const CONTENT_ROW_LIMIT = 10_000;

export type EntryType = 'file' | 'dir' | 'symlink' | 'submodule';

export interface ContentFileJson {
  type: Exclude<EntryType, 'dir'>;
  name: string;
  path: string;
  sha: string;
  size: number;
  mode: string;
  encoding: 'base64';
  content: string;
  is_conflicted: boolean;
  metadata?: FileMetadataRecord;
}

export interface ContentEntryJson {
  type: EntryType;
  name: string;
  path: string;
  sha: string;
  size?: number;
  mode?: string;
  metadata?: FileMetadataRecord;
}

export interface ContentDirJson {
  type: 'dir';
  name: string;
  path: string;
  sha: string;
  child_count: number;
  entries: ContentEntryJson[];
  truncated: boolean;
  metadata?: FileMetadataRecord;
}

export interface ContentRequest {
  path: string;
  depth: number;
  /** Metadata filters (key, value), ANDed. */
  filters: ReadonlyArray<readonly [string, string]>;
}

export function entryType(mode: string): EntryType {
  if (mode === TREE_MODE) return 'dir';
  if (mode === '120000') return 'symlink';
  if (mode === '160000') return 'submodule';
  return 'file';
}

/** A path as given in the query: `""` or `/` is the root; leading and trailing `/` are ignored. */
export function contentPath(raw: string | undefined): string {
  const trimmed = (raw ?? '').replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? '' : normalizePath(trimmed);
}

/** What sits at `path` in the view; missing → 404 FILE_NOT_FOUND. */
export function locate(view: ChangeView, path: string): TreeValue {
  const value = cachedLookup(view.store, view.repoId, view.treeOid, path);
  if (!value) throw new ServiceError('FILE_NOT_FOUND', `no file or directory at ${JSON.stringify(path)} in change ${view.ref.changeId}`, { path });
  return value;
}

const nameOf = (path: string): string => path.slice(path.lastIndexOf('/') + 1);

type Meta = Database<unknown, Key>;

export function fileMetadata(meta: RecordReader, repoId: string, path: string): FileMetadataRecord | undefined {
  const record = meta.get(K.fileMeta(repoId, path)) as FileMetadataRecord | undefined;
  return record && Object.keys(record).length > 0 ? record : undefined;
}

/** Above this many metadata records under a directory, entries look theirs up one by one. */
const METADATA_SCAN_LIMIT = 20_000;

/**
 * Metadata of every path under `dir`, by path: one range scan (metadata is sparse, so this is
 * usually a handful of records). Null when there are more than `limit`, too many to be worth
 * scanning (the scan covers the whole subtree, whatever the listing's depth).
 */
function metadataUnder(meta: Meta, repoId: string, dir: string, limit: number): Map<string, FileMetadataRecord> | null {
  const prefix = dir === '' ? '' : `${dir}/`;
  const found = new Map<string, FileMetadataRecord>();
  const range = meta.getRange({ start: K.fileMeta(repoId, prefix), end: K.fileMeta(repoId, `${prefix}\u{10ffff}`) });
  for (const { key, value } of range) {
    if (found.size >= limit) return null;
    found.set(lastPart(key), value as FileMetadataRecord);
  }
  return found;
}

/** `meta`: where file metadata is read (the front end passes its record cache). */
export function fileJson(storage: Storage, repoId: string, view: ChangeView, path: string, value: TreeValue, meta: RecordReader = storage.meta): ContentFileJson {
  const type = entryType(value.mode) as ContentFileJson['type'];
  const content = type === 'submodule' ? new Uint8Array(0) : readBlob(view.store, value.oid);
  const json: ContentFileJson = {
    type,
    name: nameOf(path),
    path,
    sha: value.oid,
    size: content.length,
    mode: value.mode,
    encoding: 'base64',
    content: Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('base64'),
    is_conflicted: view.conflictPaths.has(path),
  };
  const metadata = fileMetadata(meta, repoId, path);
  if (metadata) json.metadata = metadata;
  return json;
}

export function dirJson(storage: Storage, repoId: string, view: ChangeView, path: string, value: TreeValue, request: ContentRequest): ContentDirJson {
  const childCount = treeEntryCount(view.store, repoId, value.oid);
  const json: ContentDirJson = { type: 'dir', name: nameOf(path), path, sha: value.oid, child_count: childCount, entries: [], truncated: false };
  // A one-level listing (often on the front end) scans no more records than it would look up.
  const scanLimit = request.depth === 1 ? Math.min(METADATA_SCAN_LIMIT, Math.max(256, 2 * childCount)) : METADATA_SCAN_LIMIT;
  const metaByPath = request.depth > 0 ? metadataUnder(storage.meta, repoId, path, scanLimit) : null;
  const metadataOf = (p: string): FileMetadataRecord | undefined => {
    const record = metaByPath ? metaByPath.get(p) : fileMetadata(storage.meta, repoId, p);
    return record && Object.keys(record).length > 0 ? record : undefined;
  };
  const own = fileMetadata(storage.meta, repoId, path);
  if (own) json.metadata = own;
  if (request.depth === 0) return json;
  for (const entry of cachedWalk(view.store, repoId, value.oid, request.depth, path)) {
    const metadata = metadataOf(entry.path);
    if (request.filters.length > 0 && !request.filters.every(([k, v]) => metadata !== undefined && Object.hasOwn(metadata, k) && metadata[k] === v)) continue;
    if (json.entries.length === CONTENT_ROW_LIMIT) {
      json.truncated = true;
      break;
    }
    const type = entryType(entry.mode);
    const row: ContentEntryJson = { type, name: entry.name, path: entry.path, sha: entry.oid };
    if (type === 'file' || type === 'symlink') row.size = view.store.size(entry.oid) ?? 0;
    if (type !== 'dir') row.mode = entry.mode;
    if (metadata) row.metadata = metadata;
    json.entries.push(row);
  }
  return json;
}

/** Either shape, for a path already located (the worker's entry point). */
export function contentJson(storage: Storage, repoId: string, view: ChangeView, request: ContentRequest): ContentFileJson | ContentDirJson {
  const value = locate(view, request.path);
  return value.mode === TREE_MODE ? dirJson(storage, repoId, view, request.path, value, request) : fileJson(storage, repoId, view, request.path, value);
}
