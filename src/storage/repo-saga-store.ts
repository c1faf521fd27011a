import type { Database, Key } from 'lmdb';
import { K, lastPart, Ranges } from './keys.js';
import { idTime } from './ids.js';
import { countOrgRepos } from './repo-store.js';
import type { RecordReader } from './read/record-cache.js';

/**
 * The durable state of repository sagas (create, rename, delete span the org's shard and the
 * repository's; `actors/repo-saga.ts` drives them). On the org's shard: the saga record, and a
 * claim in the name index that keeps the name taken while the saga runs but finds no repository.
 * On the repository's shard: the fence, the newest saga decided there (its step ran, or never will).
 */
type Meta = Database<unknown, Key>;

export type RepoSagaKind = 'create' | 'rename' | 'delete';

export interface RepoSagaRecord {
  id: string;
  kind: RepoSagaKind;
  org_id: string;
  repo_id: string;
  /** The name the saga claims (create, rename) or retires (delete), in its casing. */
  name: string;
  /** Rename only: the name the repository had, released when the rename is confirmed. */
  from: string | null;
  /** When the org's step ran (ISO); the sweeper settles sagas older than its bound. */
  at: string;
  /**
   * Create only: the Idempotency-Key of the request that started it (absent without one). A
   * repeat of that request resumes the saga instead of meeting its claim, and whoever confirms
   * the saga records the response under the key.
   */
  request?: SagaRequest;
}

/** A request's Idempotency-Key as a saga keeps it: the signing key, the key, the request's fingerprint. */
export interface SagaRequest {
  key_id: string;
  key: string;
  fingerprint: string;
}

/** A name index entry held by a saga: the name is taken, but no repository is found by it. */
export interface NameClaim {
  repo_id: string;
  /** The name in the casing the saga gave it (a conflict message quotes it). */
  name: string;
  saga_id: string;
}

/** The name index entry: a repository's id, a saga's claim, or nothing. */
export function nameEntry(meta: RecordReader, orgId: string, name: string): string | NameClaim | undefined {
  return meta.get(K.repoName(orgId, name)) as string | NameClaim | undefined;
}

export function getSaga(meta: RecordReader, orgId: string, sagaId: string): RepoSagaRecord | undefined {
  return meta.get(K.repoSaga(orgId, sagaId)) as RepoSagaRecord | undefined;
}

/** Whether the saga changes only the casing of the name: one index key, nothing to claim. */
const casingOnly = (saga: RepoSagaRecord): boolean => saga.from !== null && saga.from.toLowerCase() === saga.name.toLowerCase();

/** Records the saga and claims its name, in the org actor's transaction. */
export function beginSaga(meta: Meta, saga: RepoSagaRecord): void {
  meta.putSync(K.repoSaga(saga.org_id, saga.id), saga);
  if (casingOnly(saga)) return;
  const claim: NameClaim = { repo_id: saga.repo_id, name: saga.name, saga_id: saga.id };
  meta.putSync(K.repoName(saga.org_id, saga.name), claim);
}

/** Removes the name entry of `name` if it is this saga's claim or the repository's own name. */
function dropName(meta: Meta, saga: RepoSagaRecord, name: string): void {
  const entry = nameEntry(meta, saga.org_id, name);
  if (entry === saga.repo_id || (typeof entry === 'object' && entry.saga_id === saga.id)) meta.removeSync(K.repoName(saga.org_id, name));
}

/**
 * The org's side of a saga whose repository step has run: a create's name becomes the
 * repository's and it is listed; a rename's new name replaces the old; a delete's name is freed.
 */
export function finishSaga(meta: Meta, saga: RepoSagaRecord, createdAt?: string): void {
  const claim = nameEntry(meta, saga.org_id, saga.name);
  if (saga.kind === 'delete') dropName(meta, saga, saga.name);
  else if (typeof claim === 'object' && claim.saga_id === saga.id) meta.putSync(K.repoName(saga.org_id, saga.name), saga.repo_id);
  if (saga.kind === 'create') listRepo(meta, saga.org_id, saga.repo_id, { name: saga.name.toLowerCase(), created_at: createdAt ?? repoCreatedAt(saga.repo_id) });
  if (saga.kind === 'rename' && !casingOnly(saga)) {
    dropName(meta, saga, saga.from!);
    relistUnderName(meta, saga.org_id, saga.repo_id, saga.name.toLowerCase());
  }
  meta.removeSync(K.repoSaga(saga.org_id, saga.id));
}

/** Undoes a create or rename whose repository step never ran: its claimed name is free again. */
export function undoSaga(meta: Meta, saga: RepoSagaRecord): void {
  if (!casingOnly(saga)) dropName(meta, saga, saga.name);
  meta.removeSync(K.repoSaga(saga.org_id, saga.id));
}

/**
 * A repository's `created_at`: the time in its id, when the org reserved it. The org's shard
 * orders its list by it without reading the repository's record, which may be on another node.
 */
export function repoCreatedAt(repoId: string): string {
  return new Date(idTime(repoId)).toISOString();
}

/** What the org's list keeps of a repository: the parts of its keys in the list's other orders. */
export interface ListedRepo {
  /** Lowercased, as names compare. */
  name: string;
  created_at: string;
}

/**
 * The org's list of repositories, its orders by name and by creation time, and its count change
 * together: the org's record reads the count instead of counting the list (148 ms at a million
 * repositories), and a numbered page of `repos/list` is found by its position in an order.
 */
function listRepo(meta: Meta, orgId: string, repoId: string, listed: ListedRepo): void {
  if (isListed(meta, orgId, repoId)) return;
  const count = countOrgRepos(meta, orgId);
  meta.putSync(K.orgRepo(orgId, repoId), listed);
  meta.putSync(K.orgRepoByName(orgId, listed.name, repoId), true);
  meta.putSync(K.orgRepoByCreated(orgId, listed.created_at, repoId), true);
  meta.putSync(K.orgRepoCount(orgId), count + 1);
}

/** Takes the repository out of its org's list (the start of a delete). */
export function unlistRepo(meta: Meta, orgId: string, repoId: string): void {
  const listed = listedRepo(meta, orgId, repoId);
  if (!listed) return;
  const count = countOrgRepos(meta, orgId);
  meta.removeSync(K.orgRepo(orgId, repoId));
  meta.removeSync(K.orgRepoByName(orgId, listed.name, repoId));
  meta.removeSync(K.orgRepoByCreated(orgId, listed.created_at, repoId));
  meta.putSync(K.orgRepoCount(orgId), count - 1);
}

/** Moves a listed repository to its new name in the list's order by name (a rename's confirm). */
function relistUnderName(meta: Meta, orgId: string, repoId: string, name: string): void {
  const listed = listedRepo(meta, orgId, repoId);
  if (!listed || listed.name === name) return;
  meta.removeSync(K.orgRepoByName(orgId, listed.name, repoId));
  meta.putSync(K.orgRepoByName(orgId, name, repoId), true);
  meta.putSync(K.orgRepo(orgId, repoId), { ...listed, name });
}

function listedRepo(meta: RecordReader, orgId: string, repoId: string): ListedRepo | undefined {
  return meta.get(K.orgRepo(orgId, repoId)) as ListedRepo | undefined;
}

/** An order of `repos/list`: by lowercased name or by creation time, ties by id. */
export interface ListOrder {
  by: 'name' | 'created_at';
  desc: boolean;
}

/**
 * The org's listed repositories in `order`, from position `offset`, at most `limit`: the orders
 * are kept as keys, so LMDB skips to the position without reading records.
 */
export function orgRepoIdsBy(meta: Meta, orgId: string, order: ListOrder, offset = 0, limit?: number): Iterable<string> {
  const range = order.by === 'name' ? Ranges.orgReposByName(orgId) : Ranges.orgReposByCreated(orgId);
  const keys = meta.getKeys(order.desc ? { start: range.end, end: range.start, reverse: true, offset, limit } : { ...range, offset, limit });
  return keys.map(lastPart);
}

/**
 * Those of `ids` the org lists, in `order` or newest first (by id): a restricted token's few
 * repositories, ordered as the org's list.
 */
export function sortListed(meta: RecordReader, orgId: string, ids: readonly string[], order: ListOrder | 'newest-first'): string[] {
  const listed: Array<{ id: string; at: string }> = [];
  for (const id of ids) {
    const entry = listedRepo(meta, orgId, id);
    if (entry) listed.push({ id, at: order === 'newest-first' ? '' : order.by === 'name' ? entry.name : entry.created_at });
  }
  const sign = order === 'newest-first' || order.desc ? -1 : 1;
  listed.sort((a, b) => sign * (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return listed.map((entry) => entry.id);
}

/** Whether the repository is in its org's list (created and confirmed, not being deleted). */
export function isListed(meta: RecordReader, orgId: string, repoId: string): boolean {
  return listedRepo(meta, orgId, repoId) !== undefined;
}

/** The org's unfinished saga started by the request under `keyId`'s `key`, if any (an org has few at a time). */
export function sagaOfRequest(meta: Meta, orgId: string, keyId: string, key: string): RepoSagaRecord | undefined {
  for (const { value } of meta.getRange(Ranges.orgSagas(orgId))) {
    const saga = value as RepoSagaRecord;
    if (saga.request?.key_id === keyId && saga.request.key === key) return saga;
  }
  return undefined;
}

/** The org's unfinished saga of this repository, if any (an org has few at a time). */
export function sagaOfRepo(meta: Meta, orgId: string, repoId: string): RepoSagaRecord | undefined {
  for (const { value } of meta.getRange(Ranges.orgSagas(orgId))) {
    const saga = value as RepoSagaRecord;
    if (saga.repo_id === repoId) return saga;
  }
  return undefined;
}

/** Unfinished sagas of the given orgs that started before `cutoff` (ISO), oldest first per org. */
export function* staleSagas(meta: Meta, orgIds: Iterable<string>, cutoff: string): Generator<RepoSagaRecord> {
  for (const orgId of orgIds) {
    for (const { value } of meta.getRange(Ranges.orgSagas(orgId))) {
      const saga = value as RepoSagaRecord;
      if (saga.at >= cutoff) break;
      yield saga;
    }
  }
}

/**
 * The newest saga the repository's shard has decided: its step ran (`applied`), or the sweeper
 * settled it without the step, which must then never run.
 */
export interface SagaFence {
  saga_id: string;
  applied: boolean;
}

export function sagaFence(meta: RecordReader, repoId: string): SagaFence | null {
  return (meta.get(K.repoSagaFence(repoId)) as SagaFence | undefined) ?? null;
}

export function setSagaFence(meta: Meta, repoId: string, fence: SagaFence): void {
  meta.putSync(K.repoSagaFence(repoId), fence);
}
