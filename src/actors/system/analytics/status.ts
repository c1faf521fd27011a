/**
 * The read side of analytics (API §10): the stored document and its status, from an LMDB
 * snapshot on any thread — a few point reads, no computation, no decoding of the document.
 */
import type { Database, Key } from 'lmdb';
import type { RepoRecord } from '../../../storage/records.js';
import { getAnalyticsState } from '../../../storage/analytics-store.js';
import { headCommitOid, notesCommitOid } from './source.js';
import { readDocumentText } from './stored-document.js';

export type AnalyticsStatus = 'none' | 'current' | 'stale';

export interface StoredAnalytics {
  /** The document's JSON text, or null before the first computation. */
  text: string | null;
  status: AnalyticsStatus;
}

/**
 * `none` before the first computation; `current` when the document counts the default
 * bookmark's current commit (and notes) and the last attempt succeeded; `stale` otherwise.
 */
export function readAnalytics(meta: Database<unknown, Key>, repo: RepoRecord): StoredAnalytics {
  const text = readDocumentText(meta, repo.id);
  if (text === undefined) return { text: null, status: 'none' };
  const state = getAnalyticsState(meta, repo.id);
  const current =
    state !== undefined &&
    !state.rebuilding &&
    state.error === '' &&
    state.head === headCommitOid(meta, repo) &&
    state.notes === notesCommitOid(meta, repo.id);
  return { text, status: current ? 'current' : 'stale' };
}
