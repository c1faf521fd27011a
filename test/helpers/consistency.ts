import type { Test } from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { K, lastPart, Ranges } from '../../src/storage/keys.js';
import { getOrgBySlug } from '../../src/storage/repo-store.js';
import type { BookmarkRecord, RepoRecord } from '../../src/storage/records.js';

/**
 * Opens a data directory's LMDB and checks that every repository of the org is whole: org list ↔
 * record ↔ name index ↔ default bookmark ↔ creation operation, in both directions. Returns the
 * repositories by id.
 */
export async function checkRepositories(t: Test, dataDir: string, orgSlug: string): Promise<Map<string, RepoRecord>> {
  const storage = openStorage(dataDir);
  const repos = new Map<string, RepoRecord>();
  try {
    const org = getOrgBySlug(storage.meta, orgSlug)!;
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
      if (storage.meta.get(K.repoName(org.id, repo.name)) !== id) problem(`${repo.name}: name index does not point at ${id}`);
      const bm = storage.meta.get(K.bookmark(id, repo.default_bookmark)) as BookmarkRecord | undefined;
      if (!bm) problem(`${repo.name}: default bookmark missing`);
      if (!repo.last_op_id || !storage.meta.get(K.operation(id, repo.last_op_id))) problem(`${repo.name}: its operation is missing`);
    }
    for (const { key, value } of storage.meta.getRange(Ranges.orgNames(org.id))) {
      const id = value as string;
      if (!repos.has(id)) problem(`name index ${lastPart(key)} points at ${id}, which is not in the org list`);
    }
    t.equal(problems, 0, `${repos.size} repositories, all whole`);
  } finally {
    await storage.close();
  }
  return repos;
}
