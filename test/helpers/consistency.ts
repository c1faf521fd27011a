import type { Test } from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { K, lastPart, Ranges } from '../../src/storage/keys.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import type { BookmarkRecord, RepoRecord } from '../../src/storage/records.js';
import { repoCreatedAt, type ListedRepo, type NameClaim, type RepoSagaRecord } from '../../src/storage/repo-saga-store.js';

/**
 * Opens a data directory's LMDB and checks that every repository of the org is whole: org list ↔
 * record ↔ name index ↔ default bookmark ↔ creation operation, in both directions, and that every
 * name an unfinished saga holds has its saga's record. Returns the repositories by id.
 */
export async function checkRepositories(t: Test, dataDir: string, orgSlug: string): Promise<Map<string, RepoRecord>> {
  const storage = openStorage(dataDir);
  const repos = new Map<string, RepoRecord>();
  try {
    const org = new LmdbOrgDirectory(storage).orgBySlug(orgSlug)!;
    let problems = 0;
    const problem = (what: string): void => {
      problems++;
      if (problems <= 10) t.fail(what);
    };
    for (const key of storage.meta.getKeys(Ranges.orgRepos(org.id))) {
      const id = lastPart(key);
      const repo = storage.meta.get(K.repo(id)) as RepoRecord | undefined;
      if (!repo) {
        problem(`org list names ${id} but it has no record`);
        continue;
      }
      repos.set(id, repo);
      const entry = storage.meta.get(K.repoName(org.id, repo.name)) as string | NameClaim | undefined;
      // Mid-rename the record's name runs ahead: it is claimed, and the old name still finds it.
      const saga = typeof entry === 'object' && entry.repo_id === id ? (storage.meta.get(K.repoSaga(org.id, entry.saga_id)) as RepoSagaRecord | undefined) : undefined;
      const reachable = entry === id || (saga?.kind === 'rename' && storage.meta.get(K.repoName(org.id, saga.from!)) === id);
      if (!reachable) problem(`${repo.name}: name index does not point at ${id}`);
      // The list's orders: the name the index finds it by (the old one mid-rename), its creation time.
      const kept = storage.meta.get(key) as ListedRepo;
      const indexedName = entry === id ? repo.name.toLowerCase() : saga?.from?.toLowerCase();
      // Listed by its id's time; a repository made before layout 6 shows the later time its step ran.
      if (kept.name !== indexedName || (kept.created_at !== repo.created_at && kept.created_at !== repoCreatedAt(id))) problem(`${repo.name}: listed as ${JSON.stringify(kept)}`);
      if (storage.meta.get(K.orgRepoByName(org.id, kept.name, id)) !== true) problem(`${repo.name}: not in the list's order by name`);
      if (storage.meta.get(K.orgRepoByCreated(org.id, kept.created_at, id)) !== true) problem(`${repo.name}: not in the list's order by creation`);
      const bm = storage.meta.get(K.bookmark(id, repo.default_bookmark)) as BookmarkRecord | undefined;
      if (!bm) problem(`${repo.name}: default bookmark missing`);
      if (!repo.last_op_id || !storage.meta.get(K.operation(id, repo.last_op_id))) problem(`${repo.name}: its operation is missing`);
    }
    for (const { key, value } of storage.meta.getRange(Ranges.orgNames(org.id))) {
      // A claim (an object) is a name an unfinished saga holds: it finds no repository, and the
      // saga's record is there for the sweeper to settle it.
      if (typeof value === 'object') {
        const claim = value as NameClaim;
        if (storage.meta.get(K.repoSaga(org.id, claim.saga_id)) === undefined) problem(`name ${lastPart(key)} is claimed by a saga that has no record`);
        continue;
      }
      const id = value as string;
      if (!repos.has(id)) problem(`name index ${lastPart(key)} points at ${id}, which is not in the org list`);
    }
    const counted = (storage.meta.get(K.orgRepoCount(org.id)) as number | undefined) ?? 0;
    const listed = storage.meta.getKeysCount(Ranges.orgRepos(org.id));
    if (counted !== listed) problem(`the org counts ${counted} repositories, its list holds ${listed}`);
    for (const order of [Ranges.orgReposByName(org.id), Ranges.orgReposByCreated(org.id)]) {
      const ordered = storage.meta.getKeysCount(order);
      if (ordered !== listed) problem(`an order of the org's list holds ${ordered} repositories, the list ${listed}`);
    }
    t.equal(problems, 0, `${repos.size} repositories, all whole`);
  } finally {
    await storage.close();
  }
  return repos;
}
