import type { BookmarkRecord, RepoRecord } from '../../storage/records.js';

/** Bookmark records as the API shows them (API §6.1) and as bookmark events carry them (§11.2). */

export interface BookmarkView {
  name: string;
  change_id: string;
  is_default: boolean;
}

export function bookmarkView(repo: Pick<RepoRecord, 'default_bookmark'>, record: BookmarkRecord): BookmarkView {
  return { name: record.name, change_id: record.change_id, is_default: record.name === repo.default_bookmark };
}

export interface BookmarkEventView extends BookmarkView {
  /** The current commit of the bookmark's change; the null oid at the virtual root. */
  commit_oid: string;
}

export function bookmarkEventView(repo: Pick<RepoRecord, 'default_bookmark'>, record: BookmarkRecord, commitOid: string): BookmarkEventView {
  return { ...bookmarkView(repo, record), commit_oid: commitOid };
}
