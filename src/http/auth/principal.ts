import type { RecordReader } from '../../storage/read/record-cache.js';
import type { OrgRecord, RepoRecord, SigningKeyRecord } from '../../storage/records.js';
import { getRepo, getRepoByName } from '../../storage/repo-store.js';
import type { PrincipalMsg } from '../../protocol/messages.js';
import type { Permission } from './permissions.js';

export interface AuthorClaim {
  name: string;
  email: string | null;
}

/** The verified caller of a request. */
export interface Principal {
  org: OrgRecord;
  key: SigningKeyRecord;
  permissions: ReadonlySet<Permission>;
  /** The token's `repos` claim, lowercased `org/name`, or null. */
  repoNames: string[] | null;
  /** The token's `repo_ids` claim, or null. */
  repoIds: string[] | null;
  authors: AuthorClaim[] | null;
  /** Token expiry, seconds since the epoch. */
  exp: number;
  /** The same principal as actor messages carry it. */
  msg: PrincipalMsg;
}

export function isRestricted(p: Principal): boolean {
  return p.key.repo_ids !== null || p.repoIds !== null || p.repoNames !== null;
}

/**
 * The token's own narrowing of its key's repositories ('' when it narrows nothing): what an
 * idempotent request's fingerprint adds, so that a response stored for one token is replayed only
 * to a token of the same key that reaches the same repositories (idempotency-gate.ts).
 */
export function tokenReach(p: Principal): string {
  if (p.repoIds === null && p.repoNames === null) return '';
  return JSON.stringify([p.repoIds && [...p.repoIds].sort(), p.repoNames && [...p.repoNames].sort()]);
}

/** Whether the token (and its key) may reach a repository (API §2, restrictions). */
export function canAccessRepo(p: Principal, repo: Pick<RepoRecord, 'id' | 'name'>): boolean {
  if (p.key.repo_ids && !p.key.repo_ids.includes(repo.id)) return false;
  if (p.repoIds && !p.repoIds.includes(repo.id)) return false;
  if (p.repoNames && !p.repoNames.includes(`${p.org.slug}/${repo.name}`.toLowerCase())) return false;
  return true;
}

/**
 * For a repository name that does not exist: whether the restriction would allow it, so that a
 * restricted token gets 403 rather than learning which names exist.
 */
export function mayNameRepo(p: Principal, name: string): boolean {
  if (p.key.repo_ids || p.repoIds) return false;
  if (p.repoNames && !p.repoNames.includes(`${p.org.slug}/${name}`.toLowerCase())) return false;
  return true;
}

/**
 * Whether the principal may rename `repo` (which it reaches) to `name`: a token restricted by
 * name must still reach the repository afterwards, and no restricted token may learn through a
 * clash that a repository outside its reach has that name.
 */
export function mayRenameRepo(meta: RecordReader, p: Principal, repo: Pick<RepoRecord, 'id'>, name: string): boolean {
  if (!isRestricted(p)) return true;
  if (p.repoNames && !p.repoNames.includes(`${p.org.slug}/${name}`.toLowerCase())) return false;
  const clash = getRepoByName(meta, p.org.id, name);
  return !clash || clash.id === repo.id || canAccessRepo(p, clash);
}

/** The names of the token's `repos` claim that are in its org, without the org. */
export function claimedNames(p: Principal): string[] {
  const prefix = `${p.org.slug}/`;
  return (p.repoNames ?? []).filter((full) => full.startsWith(prefix)).map((full) => full.slice(prefix.length));
}

/**
 * Repository ids a restricted principal may reach right now (null when unrestricted): the key's
 * and the token's restrictions intersected, names resolved to their current repositories, ids of
 * repositories that no longer exist left out. `meta` must answer the names' index entries and
 * the records of the ids (restriction-reads.ts gathers them in a cluster).
 */
export function allowedRepoIds(meta: RecordReader, p: Principal): string[] | null {
  if (!isRestricted(p)) return null;
  let ids: string[] | null = p.key.repo_ids ? [...p.key.repo_ids] : null;
  const narrow = (next: string[]): void => {
    ids = ids ? ids.filter((id) => next.includes(id)) : next;
  };
  if (p.repoIds) narrow(p.repoIds);
  if (p.repoNames) {
    const resolved: string[] = [];
    for (const name of claimedNames(p)) {
      const repo = getRepoByName(meta, p.org.id, name);
      if (repo) resolved.push(repo.id);
    }
    narrow(resolved);
  }
  // Each once: a name and an id (or two spellings of a name) may claim the same repository.
  return [...new Set<string>(ids ?? [])].filter((id) => {
    const repo = getRepo(meta, id);
    return repo !== undefined && repo.org_id === p.org.id;
  });
}
