/**
 * What analytics reads about a repository: the default bookmark's commit, the agentblame notes
 * commit (imported by upstream sync) and the git objects. An interface so the actor can be tested
 * against a source that fails; `LmdbAnalyticsSource` is the real one, usable from any thread.
 */
import type { Database, Key } from 'lmdb';
import type { ObjectStore } from '../../../vcs/object-store.js';
import { ROOT_CHANGE_ID } from '../../../vcs/ids.js';
import type { Storage } from '../../../storage/database.js';
import { changeIdOfCommitOid, evolutionOf, getChange, objectStore } from '../../../storage/change-store.js';
import { getNotesRef, getRepo, headChangeId } from '../../../storage/repo-store.js';
import type { RepoRecord } from '../../../storage/records.js';

export interface AnalyticsSource {
  /** False once the repository is deleted. */
  exists(repoId: string): boolean;
  /** The default bookmark's commit oid; null when it is on the virtual root (nothing to count). */
  head(repoId: string): string | null;
  /** The `refs/notes/agentblame` notes commit, or null when the repository has none. */
  notes(repoId: string): string | null;
  /** The repository's objects; writes (materialized views) must stay out of the repository. */
  objects(repoId: string): ObjectStore;
  /** The commit this one replaced when the server rewrote its change (evolve or rebase), or null. */
  predecessor(repoId: string, commitOid: string): string | null;
}

type Meta = Database<unknown, Key>;

/** The default bookmark's commit oid, or null (virtual root, or a bookmark on a missing change). */
export function headCommitOid(meta: Meta, repo: RepoRecord): string | null {
  const changeId = headChangeId(meta, repo);
  if (changeId === ROOT_CHANGE_ID) return null;
  return getChange(meta, repo.id, changeId)?.commit_oid ?? null;
}

/** The `refs/notes/agentblame` notes commit that upstream sync imported, or null. */
export function notesCommitOid(meta: Meta, repoId: string): string | null {
  return getNotesRef(meta, repoId, 'agentblame') ?? null;
}

export class LmdbAnalyticsSource implements AnalyticsSource {
  constructor(private readonly storage: Storage) {}

  exists(repoId: string): boolean {
    return getRepo(this.storage.meta, repoId) !== undefined;
  }

  head(repoId: string): string | null {
    const repo = getRepo(this.storage.meta, repoId);
    return repo ? headCommitOid(this.storage.meta, repo) : null;
  }

  notes(repoId: string): string | null {
    return notesCommitOid(this.storage.meta, repoId);
  }

  objects(repoId: string): ObjectStore {
    return objectStore(this.storage, repoId, { scratch: true });
  }

  predecessor(repoId: string, commitOid: string): string | null {
    const meta = this.storage.meta;
    const changeId = changeIdOfCommitOid(meta, repoId, commitOid);
    if (!changeId) return null;
    for (const { record } of evolutionOf(meta, repoId, changeId)) {
      if (record.commit_oid === commitOid) return record.predecessor_oid;
    }
    return null;
  }
}
