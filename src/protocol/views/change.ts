import type { ChangeCommitView, Person, PersonWithDate } from '../../vcs/commit.js';
import type { ChangeRecord } from '../../storage/records.js';

/**
 * Changes as the API shows them (API §5.1) and as change events carry them (§11.2). The commit
 * supplies the description (without managed trailers) and the people; the record supplies the
 * change's identity, parents (change ids) and times.
 */
export interface ChangeView {
  id: string;
  current_commit_oid: string;
  is_conflicted: boolean;
  message: string;
  /** Deprecated: the first of `authors`, with the author time. */
  author: PersonWithDate;
  committer: PersonWithDate;
  authors: Person[];
  authored_at: string;
  parents: string[];
  created_at: string;
  updated_at: string;
}

export interface ChangeDetailView extends ChangeView {
  /** Paths changed relative to the first parent, in the materialized view. */
  files: string[];
  /** Conflicted paths. */
  conflicts: string[];
}

export function changeView(record: ChangeRecord, commit: ChangeCommitView): ChangeView {
  return {
    id: record.id,
    current_commit_oid: record.commit_oid,
    is_conflicted: record.is_conflicted,
    message: commit.message,
    author: commit.author,
    committer: commit.committer,
    authors: commit.authors,
    authored_at: commit.authoredAt,
    parents: record.parents,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

export interface EvolutionView {
  commit_oid: string;
  predecessor_oid: string | null;
  operation_id: string;
  created_at: string;
}
