import type { Database, Key } from 'lmdb';
import { K, under } from './keys.js';
import type { RecordReader } from './read/record-cache.js';
import type { BookmarkRecord, OrgRecord, RepoRecord, SigningKeyRecord, TagRecord } from './records.js';

/**
 * Reads of org, key and repository records. They work on any thread, inside a write transaction
 * (actors) or on a read snapshot (the front end's fast path), because LMDB reads are synchronous.
 */
export const ROOT_CHANGE_ID = 'z'.repeat(32);

type Meta = Database<unknown, Key>;

export function getOrg(meta: RecordReader, orgId: string): OrgRecord | undefined {
  return meta.get(K.org(orgId)) as OrgRecord | undefined;
}

export function getOrgBySlug(meta: RecordReader, slug: string): OrgRecord | undefined {
  const id = meta.get(K.orgSlug(slug)) as string | undefined;
  return id ? getOrg(meta, id) : undefined;
}

export function getSigningKey(meta: RecordReader, keyId: string): SigningKeyRecord | undefined {
  return meta.get(K.key(keyId)) as SigningKeyRecord | undefined;
}

export function getRepo(meta: RecordReader, repoId: string): RepoRecord | undefined {
  return meta.get(K.repo(repoId)) as RepoRecord | undefined;
}

/** Repository lookup by name, case-insensitively (API §4.2). */
export function getRepoByName(meta: RecordReader, orgId: string, name: string): RepoRecord | undefined {
  const id = meta.get(K.repoName(orgId, name)) as string | undefined;
  return id ? getRepo(meta, id) : undefined;
}

/** Stores the repository record (in the caller's write transaction). */
export function putRepo(meta: Meta, repo: RepoRecord): void {
  meta.putSync(K.repo(repo.id), repo);
}

export function getBookmark(meta: RecordReader, repoId: string, name: string): BookmarkRecord | undefined {
  return meta.get(K.bookmark(repoId, name)) as BookmarkRecord | undefined;
}

export function getTag(meta: RecordReader, repoId: string, name: string): TagRecord | undefined {
  return meta.get(K.tag(repoId, name)) as TagRecord | undefined;
}

export function putTag(meta: Meta, repoId: string, tag: TagRecord): void {
  meta.putSync(K.tag(repoId, tag.name), tag);
}

export function removeTag(meta: Meta, repoId: string, name: string): void {
  meta.removeSync(K.tag(repoId, name));
}

export function headChangeId(meta: RecordReader, repo: RepoRecord): string {
  return getBookmark(meta, repo.id, repo.default_bookmark)?.change_id ?? ROOT_CHANGE_ID;
}

/** Repository ids of an org, newest first, starting after `afterId` (exclusive) when given. */
export function* orgRepoIds(meta: Meta, orgId: string, afterId?: string): Generator<string> {
  const range = under(['o', orgId, 'repo']);
  const start: Key = afterId ? ['o', orgId, 'repo', afterId] : range.end;
  for (const key of meta.getKeys({ start, end: range.start, reverse: true })) {
    const id = (key as string[])[3]!;
    if (id !== afterId) yield id;
  }
}

export function countOrgRepos(meta: Meta, orgId: string): number {
  return meta.getKeysCount(under(['o', orgId, 'repo']));
}

export function orgKeys(meta: Meta, orgId: string): SigningKeyRecord[] {
  const out: SigningKeyRecord[] = [];
  for (const key of meta.getKeys(under(['o', orgId, 'key']))) {
    const rec = getSigningKey(meta, (key as string[])[3]!);
    if (rec) out.push(rec);
  }
  return out;
}
