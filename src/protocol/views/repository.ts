import { getLatestSync } from '../../storage/sync-store.js';
import type { OrgRecord, RepoRecord } from '../../storage/records.js';
import { getBookmark, headChangeId } from '../../storage/repo-store.js';
import type { RecordReader } from '../../storage/read/record-cache.js';
import { serialize } from '../serializers.js';

/** Repository records as the API shows them (API §4.1, §11.2). Credentials never appear here. */
type Meta = RecordReader;

/** Where git clones the repository (API §4.1, §14): the public URL, the org, the name, `.git`. */
export function cloneUrl(publicUrl: string, org: OrgRecord, repo: RepoRecord): string {
  return `${publicUrl}/${org.slug}/${encodeURIComponent(repo.name)}.git`;
}

export function repositoryView(meta: Meta, repo: RepoRecord, org: OrgRecord, publicUrl: string): Record<string, unknown> {
  return {
    id: repo.id,
    org: org.slug,
    name: repo.name,
    default_bookmark: repo.default_bookmark,
    head_change_id: headChangeId(meta, repo),
    upstream: repo.upstream && {
      url: repo.upstream.url,
      auth_kind: repo.upstream.auth_kind,
      latest_sync: getLatestSync(meta, repo.id) ?? null,
    },
    created_at: repo.created_at,
    tags: repo.tags,
    clone_url: cloneUrl(publicUrl, org, repo),
  };
}

interface KeptJson {
  org: OrgRecord;
  head: unknown;
  latestSync: unknown;
  publicUrl: string;
  json: Uint8Array;
}

/**
 * Serialized views kept with the records they were built from. The front end's record cache
 * hands out the same frozen objects until a write may have changed them, so a view whose inputs
 * are the same objects is the same document; a record read afresh (a write in flight, another
 * reader) is a new object, and its view is built again.
 */
const keptJson = new WeakMap<RepoRecord, KeptJson>();

const utf8 = new TextEncoder();

/**
 * `repositoryView` serialized, built once per version of its records. Kept as UTF-8 bytes: a
 * string body would be encoded again for the socket at every request. The bytes own their memory
 * (a small `Buffer.from` would share a pooled 8 KiB slab and keep all of it for the record's life).
 */
export function repositoryJson(meta: Meta, repo: RepoRecord, org: OrgRecord, publicUrl: string): Uint8Array {
  const head = getBookmark(meta, repo.id, repo.default_bookmark);
  const latestSync = repo.upstream ? getLatestSync(meta, repo.id) : undefined;
  const kept = keptJson.get(repo);
  if (kept && kept.org === org && kept.head === head && kept.latestSync === latestSync && kept.publicUrl === publicUrl) return kept.json;
  const json = utf8.encode(serialize('repository', repositoryView(meta, repo, org, publicUrl)));
  keptJson.set(repo, { org, head, latestSync, publicUrl, json });
  return json;
}

/** The `repo` object of repository events. */
export function repoEventView(meta: Meta, repo: RepoRecord): Record<string, unknown> {
  return {
    id: repo.id,
    name: repo.name,
    default_bookmark: repo.default_bookmark,
    head_change_id: headChangeId(meta, repo),
    created_at: repo.created_at,
    tags: repo.tags,
  };
}

/** The smaller item of `GET /{org}/repos/list` (API §4.4). */
export function repositoryListItem(meta: Meta, repo: RepoRecord): Record<string, unknown> {
  let upstream = null;
  if (repo.upstream) {
    const latest = getLatestSync(meta, repo.id);
    const status = !latest ? 'never' : latest.status === 'completed' ? 'synced' : latest.status === 'failed' ? 'error' : 'syncing';
    upstream = { uri: repo.upstream.url, status };
  }
  return { id: repo.id, name: repo.name, default_branch: repo.default_bookmark, created_at: repo.created_at, metadata: repo.tags, upstream };
}
