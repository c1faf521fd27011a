import type { Transaction } from 'lmdb';
import { ROOT_CHANGE_ID } from '../vcs/ids.js';
import type { Storage } from './database.js';
import { decodeObjectValue } from './git-object-store.js';
import { K, lastPart, Ranges } from './keys.js';
import type { BookmarkRecord, ChangeRecord, RepoRecord, TagRecord } from './records.js';

/**
 * A repository's refs as git sees them (API §13 export, §14 git over HTTP), read from one
 * snapshot: every bookmark as `refs/heads/<name>` (a bookmark at the virtual root has no commit,
 * so no ref), tags pulled from the upstream as `refs/tags/<name>` with the object an annotated
 * tag finally names, pulled notes as `refs/notes/<name>`, and — for the export only — every
 * commit the repository ever had as `refs/jj/keep/<oid>`. Sorted by name, as git lists refs.
 */
export interface GitRef {
  name: string;
  oid: string;
  /** For an annotated tag: the object it peels to (following tag objects); otherwise null. */
  peeled: string | null;
}

export interface RepoRefs {
  refs: GitRef[];
  /** What HEAD names: the default bookmark's branch, which is unborn while the bookmark sits at the virtual root. */
  head: { target: string; oid: string | null };
}

/** Whether the repository has at most `limit` branches and tags: few enough to list on the front end. */
export function refCountAtMost(storage: Storage, repoId: string, limit: number): boolean {
  let count = 0;
  for (const range of [Ranges.bookmarks(repoId), Ranges.tags(repoId)]) {
    for (const _ of storage.meta.getKeys({ ...range, limit: limit + 1 - count })) if (++count > limit) return false;
  }
  return true;
}

/** The object a tag finally names (following tag objects). */
function peel(storage: Storage, txn: Transaction, repoId: string, oid: string): string {
  let current = oid;
  for (let depth = 0; depth < 16; depth++) {
    const value = storage.objects.get(K.object(repoId, current), { transaction: txn });
    if (!value) return current;
    const info = decodeObjectValue(current, value);
    if (info.type !== 'tag') return current;
    const m = /^object ([0-9a-f]{40})\n/.exec(Buffer.from(info.content).toString('latin1', 0, 48));
    if (!m) return current;
    current = m[1]!;
  }
  return current;
}

export function listGitRefs(storage: Storage, txn: Transaction, repo: RepoRecord, opts: { kept: boolean }): RepoRefs {
  const { meta } = storage;
  const refs: GitRef[] = [];
  let head: RepoRefs['head'] = { target: `refs/heads/${repo.default_bookmark}`, oid: null };
  for (const { value } of meta.getRange({ ...Ranges.bookmarks(repo.id), transaction: txn })) {
    const bookmark = value as BookmarkRecord;
    if (bookmark.change_id === ROOT_CHANGE_ID) continue;
    const change = meta.get(K.change(repo.id, bookmark.change_id), { transaction: txn }) as ChangeRecord | undefined;
    if (!change) continue;
    refs.push({ name: `refs/heads/${bookmark.name}`, oid: change.commit_oid, peeled: null });
    if (bookmark.name === repo.default_bookmark) head = { target: head.target, oid: change.commit_oid };
  }
  if (opts.kept) {
    for (const key of meta.getKeys({ ...Ranges.commits(repo.id), transaction: txn })) {
      const oid = lastPart(key);
      refs.push({ name: `refs/jj/keep/${oid}`, oid, peeled: null });
    }
  }
  for (const { value } of meta.getRange({ ...Ranges.tags(repo.id), transaction: txn })) {
    const tag = value as TagRecord;
    const peeled = peel(storage, txn, repo.id, tag.oid);
    refs.push({ name: `refs/tags/${tag.name}`, oid: tag.oid, peeled: peeled === tag.oid ? null : peeled });
  }
  for (const { key, value } of meta.getRange({ ...Ranges.notes(repo.id), transaction: txn })) {
    refs.push({ name: `refs/notes/${lastPart(key)}`, oid: value as string, peeled: null });
  }
  refs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { refs, head };
}
