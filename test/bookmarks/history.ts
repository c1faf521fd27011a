import { Ranges } from '../../src/storage/keys.js';
import { openStorage } from '../../src/storage/database.js';
import type { OperationRecord } from '../../src/storage/records.js';
import type { TestServer } from '../helpers/server.js';

/** Building repository history through the API for the bookmark tests. */

export const ROOT = 'z'.repeat(32);

export async function createRepo(s: TestServer, name: string): Promise<void> {
  const res = await s.api('POST', '/acme/repos', { body: { name } });
  if (res.status !== 201) throw new Error(`create repo ${name}: ${res.status} ${res.text}`);
}

/** A new change on `base` writing `files` (path → text); returns its change id. */
export async function write(s: TestServer, repo: string, base: string, files: Record<string, string>, message = 'write'): Promise<string> {
  const ops = Object.entries(files).map(([path, content]) => ({ op: 'write', path, content }));
  const res = await s.api('POST', `/acme/${repo}/apply-ops`, { body: { base_change_id: base, message, ops } });
  if (res.status !== 201) throw new Error(`apply-ops on ${base}: ${res.status} ${res.text}`);
  return res.json.change.id as string;
}

/** A chain of `n` changes on `base`, each writing `file`; returns their ids oldest first. */
export async function chain(s: TestServer, repo: string, base: string, n: number, file = 'chain.txt'): Promise<string[]> {
  const ids: string[] = [];
  let parent = base;
  for (let i = 0; i < n; i++) {
    parent = await write(s, repo, parent, { [file]: `step ${i}\n` });
    ids.push(parent);
  }
  return ids;
}

export async function bookmarkTarget(s: TestServer, repo: string, name: string): Promise<string | null> {
  const res = await s.api('GET', `/acme/${repo}/bookmarks/${encodeURIComponent(name)}`);
  return res.status === 200 ? (res.json.change_id as string) : null;
}

/** The repository's operation log, oldest first (op ids are ULIDs). */
export function operations(s: TestServer, repoId: string): OperationRecord[] {
  const storage = openStorage(s.dataDir);
  try {
    return [...storage.meta.getRange(Ranges.operations(repoId))].map((e) => e.value as OperationRecord);
  } finally {
    void storage.close();
  }
}

export async function repoId(s: TestServer, name: string): Promise<string> {
  return (await s.api('GET', `/acme/${name}`)).json.id as string;
}
