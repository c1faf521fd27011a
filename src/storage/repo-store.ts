import type { Database, Key, Transaction } from 'lmdb';
import { SHARD_COUNT } from '../actors/shard-map.js';
import { K, lastPart, Ranges } from './keys.js';
import { removeRange } from './write-recorder.js';
import type { Storage } from './database.js';
import type { RecordReader } from './read/record-cache.js';
import type { BookmarkRecord, RepoRecord, TagRecord } from './records.js';

/**
 * Repository records, and a repository's refs (bookmarks, tags, notes). Reads work
 * on any thread, inside a write transaction (actors) or on a read snapshot (the front end's fast
 * path), because LMDB reads are synchronous; writes run in the caller's write transaction.
 */
export const ROOT_CHANGE_ID = 'z'.repeat(32);

type Meta = Database<unknown, Key>;

export function getRepo(meta: RecordReader, repoId: string): RepoRecord | undefined {
  return meta.get(K.repo(repoId)) as RepoRecord | undefined;
}

/** The repository record as a read transaction (a reader's snapshot) sees it. */
export function getRepoAt(meta: Meta, repoId: string, transaction: Transaction): RepoRecord | undefined {
  return meta.get(K.repo(repoId), { transaction }) as RepoRecord | undefined;
}

export function repoExists(meta: Meta, repoId: string): boolean {
  return meta.doesExist(K.repo(repoId));
}

/** The id a repository name resolves to, case-insensitively (API §4.2); a name a saga holds finds nothing. */
export function repoIdByName(meta: RecordReader, orgId: string, name: string): string | undefined {
  const id = meta.get(K.repoName(orgId, name));
  return typeof id === 'string' ? id : undefined;
}

/** Repository lookup by name, case-insensitively (API §4.2); a name a saga holds finds nothing. */
export function getRepoByName(meta: RecordReader, orgId: string, name: string): RepoRecord | undefined {
  const id = repoIdByName(meta, orgId, name);
  return id === undefined ? undefined : getRepo(meta, id);
}

/**
 * The repository another node resolved the name to (it holds the org's name index, this node may
 * not): this node's record of it, if it is the org's and still bears that name.
 */
export function getRepoResolvedElsewhere(meta: RecordReader, orgId: string, name: string, repoId: string): RepoRecord | undefined {
  const repo = getRepo(meta, repoId);
  return repo && repo.org_id === orgId && repo.name.toLowerCase() === name.toLowerCase() ? repo : undefined;
}

/** Stores the repository record (in the caller's write transaction). */
export function putRepo(meta: Meta, repo: RepoRecord): void {
  meta.putSync(K.repo(repo.id), repo);
}

/** Whether a repository of the org has this name (case-insensitively). */
export function isRepoNameTaken(meta: RecordReader, orgId: string, name: string): boolean {
  return meta.get(K.repoName(orgId, name)) !== undefined;
}

/**
 * Removes everything the repository owns under `['r', repoId, …]` and its objects (not the
 * repository record itself: `removeRepo`).
 */
export function clearRepository(storage: Storage, repoId: string): void {
  removeRange(storage, 'meta', Ranges.repoOwned(repoId));
  removeRange(storage, 'objects', Ranges.objects(repoId));
}

/** Removes the repository record (its org's indexes are the org actor's: repo-saga-store.ts). */
export function removeRepo(meta: Meta, repoId: string): void {
  meta.removeSync(K.repo(repoId));
}

export function getBookmark(meta: RecordReader, repoId: string, name: string): BookmarkRecord | undefined {
  return meta.get(K.bookmark(repoId, name)) as BookmarkRecord | undefined;
}

export function putBookmark(meta: Meta, repoId: string, record: BookmarkRecord): void {
  meta.putSync(K.bookmark(repoId, record.name), record);
}

export function removeBookmark(meta: Meta, repoId: string, name: string): void {
  meta.removeSync(K.bookmark(repoId, name));
}

/** Every bookmark of the repository, by name. */
export function* bookmarksOf(meta: Meta, repoId: string): Generator<BookmarkRecord> {
  for (const { value } of meta.getRange(Ranges.bookmarks(repoId))) yield value as BookmarkRecord;
}

/** The names of the repository's bookmarks (they sort as UTF-8 bytes), from the name `from` on (inclusive). */
export function bookmarkNamesFrom(meta: Meta, repoId: string, from: string | null): Iterable<string> {
  const range = Ranges.bookmarks(repoId);
  const start = from === null ? range.start : K.bookmark(repoId, from);
  return meta.getKeys({ start, end: range.end }).map(lastPart);
}

/** Every tag of the repository, by name. */
export function* tagsOf(meta: Meta, repoId: string): Generator<TagRecord> {
  for (const { value } of meta.getRange(Ranges.tags(repoId))) yield value as TagRecord;
}

/** The commit of `refs/notes/<name>` pulled from the upstream, if any. */
export function getNotesRef(meta: RecordReader, repoId: string, name: string): string | undefined {
  return meta.get(K.notes(repoId, name)) as string | undefined;
}

export function putNotesRef(meta: Meta, repoId: string, name: string, oid: string): void {
  meta.putSync(K.notes(repoId, name), oid);
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
  const range = Ranges.orgRepos(orgId);
  const start: Key = afterId ? K.orgRepo(orgId, afterId) : range.end;
  for (const key of meta.getKeys({ start, end: range.start, reverse: true })) {
    const id = lastPart(key);
    if (id !== afterId) yield id;
  }
}

/**
 * Ids of every repository: shard by shard, org by org, each org's in creation order. The orgs are
 * found from their shard-owned data (`orgsWithData`), not from the org directory.
 */
export function* allRepoIds(meta: Meta): Generator<string> {
  for (const orgId of orgsWithData(meta)) {
    for (const key of meta.getKeys(Ranges.orgRepos(orgId))) yield lastPart(key);
  }
}

/** Ids of the orgs whose shards hold any of their data here: one key read to step from one org to the next. */
export function* orgsWithData(meta: Meta): Generator<string> {
  for (let shard = 0; shard < SHARD_COUNT; shard++) {
    const orgs = Ranges.shardOrgData(shard);
    let start = orgs.start;
    for (;;) {
      let orgId: string | undefined;
      for (const key of meta.getKeys({ start, end: orgs.end, limit: 1 })) orgId = (key as string[])[2];
      if (orgId === undefined) break;
      yield orgId;
      start = Ranges.orgData(orgId).end;
    }
  }
}

/** The org's listed repositories: the count kept beside the list (none before its first repository). */
export function countOrgRepos(meta: Meta, orgId: string): number {
  return (meta.get(K.orgRepoCount(orgId)) as number | undefined) ?? 0;
}
