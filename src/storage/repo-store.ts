import type { Database, Key, Transaction } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';
import type { Storage } from './database.js';
import type { RecordReader } from './read/record-cache.js';
import type { BookmarkRecord, OrgRecord, RepoRecord, SigningKeyRecord, TagRecord } from './records.js';

/**
 * Org, key and repository records, and a repository's refs (bookmarks, tags, notes). Reads work
 * on any thread, inside a write transaction (actors) or on a read snapshot (the front end's fast
 * path), because LMDB reads are synchronous; writes run in the caller's write transaction.
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

/** Bumped on every signing-key change (admin-store.ts), so a verifier knows when to reload. */
export function signingKeyVersion(meta: RecordReader): number {
  return (meta.get(K.keyVersion()) as number | undefined) ?? 0;
}

/** Every signing key of every org. */
export function* allSigningKeys(meta: Meta): Generator<SigningKeyRecord> {
  for (const { value } of meta.getRange(Ranges.signingKeys())) yield value as SigningKeyRecord;
}

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

/** Repository lookup by name, case-insensitively (API §4.2). */
export function getRepoByName(meta: RecordReader, orgId: string, name: string): RepoRecord | undefined {
  const id = meta.get(K.repoName(orgId, name)) as string | undefined;
  return id ? getRepo(meta, id) : undefined;
}

/** Stores the repository record (in the caller's write transaction). */
export function putRepo(meta: Meta, repo: RepoRecord): void {
  meta.putSync(K.repo(repo.id), repo);
}

/** Makes a new repository findable: by name in its org, and in the org's list. */
export function indexRepo(meta: Meta, repo: RepoRecord): void {
  meta.putSync(K.repoName(repo.org_id, repo.name), repo.id);
  meta.putSync(K.orgRepo(repo.org_id, repo.id), true);
}

/** Moves a repository's name index entry from its current name to `name`. */
export function renameRepo(meta: Meta, repo: RepoRecord, name: string): void {
  meta.removeSync(K.repoName(repo.org_id, repo.name));
  meta.putSync(K.repoName(repo.org_id, name), repo.id);
}

/** Whether a repository of the org has this name (case-insensitively). */
export function isRepoNameTaken(meta: RecordReader, orgId: string, name: string): boolean {
  return meta.get(K.repoName(orgId, name)) !== undefined;
}

/**
 * Removes everything the repository owns under `['r', repoId, …]` and its objects (not the
 * repository record itself, nor its index entries: `unindexRepo`).
 */
export function clearRepository(storage: Storage, repoId: string): void {
  const { meta, objects } = storage;
  // Keys are collected before removing: a cursor is not walked while its range is being deleted.
  for (const key of [...meta.getKeys(Ranges.repoOwned(repoId))]) meta.removeSync(key);
  for (const key of [...objects.getKeys(Ranges.objects(repoId))]) objects.removeSync(key);
}

/** Removes the repository record and its index entries. */
export function unindexRepo(meta: Meta, repo: RepoRecord): void {
  meta.removeSync(K.repo(repo.id));
  meta.removeSync(K.repoName(repo.org_id, repo.name));
  meta.removeSync(K.orgRepo(repo.org_id, repo.id));
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

/** The repository's bookmarks by name (names sort as UTF-8 bytes), from the name `from` on (inclusive). */
export function* bookmarksFrom(meta: Meta, repoId: string, from: string | null): Generator<BookmarkRecord> {
  const range = Ranges.bookmarks(repoId);
  const start = from === null ? range.start : K.bookmark(repoId, from);
  for (const { value } of meta.getRange({ start, end: range.end })) yield value as BookmarkRecord;
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

/** Ids of every repository: org by org, each org's in creation order. */
export function* allRepoIds(meta: Meta): Generator<string> {
  for (const orgId of allOrgIds(meta)) for (const key of meta.getKeys(Ranges.orgRepos(orgId))) yield lastPart(key);
}

/** Ids of every org. */
export function* allOrgIds(meta: Meta): Generator<string> {
  for (const key of meta.getKeys(Ranges.orgs())) yield (key as string[])[1]!;
}

export function countOrgRepos(meta: Meta, orgId: string): number {
  return meta.getKeysCount(Ranges.orgRepos(orgId));
}

export function orgKeys(meta: Meta, orgId: string): SigningKeyRecord[] {
  const out: SigningKeyRecord[] = [];
  for (const key of meta.getKeys(Ranges.orgKeys(orgId))) {
    const rec = getSigningKey(meta, (key as string[])[3]!);
    if (rec) out.push(rec);
  }
  return out;
}
