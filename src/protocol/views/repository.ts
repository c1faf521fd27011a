import { K } from '../../storage/keys.js';
import type { OrgRecord, RepoRecord } from '../../storage/records.js';
import { headChangeId } from '../../storage/repo-store.js';
import type { RecordReader } from '../../storage/read/record-cache.js';

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
      latest_sync: meta.get(K.latestSync(repo.id)) ?? null,
    },
    created_at: repo.created_at,
    tags: repo.tags,
    clone_url: cloneUrl(publicUrl, org, repo),
  };
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
    const latest = meta.get(K.latestSync(repo.id)) as { status: string } | undefined;
    const status = !latest ? 'never' : latest.status === 'completed' ? 'synced' : latest.status === 'failed' ? 'error' : 'syncing';
    upstream = { uri: repo.upstream.url, status };
  }
  return { id: repo.id, name: repo.name, default_branch: repo.default_bookmark, created_at: repo.created_at, metadata: repo.tags, upstream };
}
