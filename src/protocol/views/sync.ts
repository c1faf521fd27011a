import type { SyncRecord } from '../../storage/records.js';

/**
 * Sync records as the API shows them (API §9) and as sync events carry them (§11.2): the stored
 * record minus its scheduling fields. Credentials are never part of a sync record to begin with.
 */
export interface SyncRunView {
  id: string;
  repo_id: string;
  direction: SyncRecord['direction'];
  status: SyncRecord['status'];
  attempt: number;
  stats: SyncRecord['stats'];
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface SyncView extends SyncRunView {
  ref_globs: SyncRecord['ref_globs'];
}

export function syncRunView(record: SyncRecord): SyncRunView {
  return {
    id: record.id,
    repo_id: record.repo_id,
    direction: record.direction,
    status: record.status,
    attempt: record.attempt,
    stats: record.stats,
    error: record.error,
    created_at: record.created_at,
    started_at: record.started_at,
    finished_at: record.finished_at,
  };
}

export function syncView(record: SyncRecord): SyncView {
  return { ...syncRunView(record), ref_globs: record.ref_globs };
}
