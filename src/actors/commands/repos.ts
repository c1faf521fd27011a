import { ServiceError, invalid } from '../../errors.js';
import { NULL_OID } from '../../vcs/ids.js';
import { releaseRepository } from '../../storage/quota.js';
import type { BookmarkRecord, RepoRecord, UpstreamRecord } from '../../storage/records.js';
import { LmdbRepoStore } from '../../storage/lmdb-repo-store.js';
import { clearRepository, getBookmark, getRepo, putRepo, removeRepo, ROOT_CHANGE_ID } from '../../storage/repo-store.js';
import { repoCreatedAt, sagaFence, setSagaFence } from '../../storage/repo-saga-store.js';
import { repoEventView, repositoryView } from '../../protocol/views/repository.js';
import { defineCommand, type CommandContext } from '../command.js';
import { orgOf } from './org-of.js';
import type { UpstreamInput } from '../../protocol/schemas/repos.js';

/**
 * The repository's own steps of its lifecycle, run by its actor on its shard: initialising it,
 * updating it (a rename's record side) and deleting its data. Names are the org actor's
 * (repo-names.ts); actors/repo-saga.ts chains the two.
 */
export interface CreateRepoInput {
  org_id: string;
  name: string | null;
  default_bookmark: string;
  tags: Record<string, string>;
  upstream: UpstreamInput | null;
}

/** Create, step 2: what the org actor reserved, with the request's fields. */
export interface InitRepoInput extends CreateRepoInput {
  repo_id: string;
  name: string;
  saga_id: string;
}

export interface UpdateRepoInput {
  repo_id: string;
  name?: string;
  default_bookmark?: string;
  tags?: Record<string, string | null>;
  /** Absent: unchanged; null: removed; object: replaced (auth omitted keeps the credential for the same origin). */
  upstream?: UpstreamInput | null;
  /** With `name`: the rename saga whose name this is (repo-names.ts). */
  saga_id?: string;
}

export interface DeleteRepoInput {
  repo_id: string;
}

/** The sweeper's question about a stale create or rename: did its repository step run? */
export interface SagaStepInput {
  repo_id: string;
  saga_id: string;
}

/** Scheme, host and port: a stored credential is only ever presented to the origin it was given for. */
const originOf = (url: string): string => new URL(url).origin;

function sealUpstream(ctx: CommandContext, input: UpstreamInput, previous: UpstreamRecord | null): UpstreamRecord {
  if (input.auth === undefined) {
    const kept = previous && originOf(previous.url) === originOf(input.url) ? previous : null;
    return { url: input.url, auth_kind: kept?.auth_kind ?? null, sealed_auth: kept?.sealed_auth ?? null };
  }
  if (input.auth === null) return { url: input.url, auth_kind: null, sealed_auth: null };
  return { url: input.url, auth_kind: input.auth.kind, sealed_auth: ctx.secrets.seal(JSON.stringify(input.auth)) };
}

/** Refuses the step of a saga the sweeper has already settled without it. */
function expired(): ServiceError {
  return new ServiceError('UNAVAILABLE', 'the request took too long and was undone; retry', undefined, { retryAfter: 1 });
}

/**
 * Create, step 2. Idempotent by saga: run again (a retried request) it answers the repository it
 * made, and writes and emits nothing more.
 */
export const initRepo = defineCommand<InitRepoInput>('repo.init', (input, ctx) => {
  const { meta } = ctx.storage;
  const org = orgOf(ctx, input.org_id);
  const fence = sagaFence(meta, input.repo_id);
  const existing = getRepo(meta, input.repo_id);
  if (fence?.saga_id === input.saga_id && fence.applied && existing) {
    return { status: 201, body: repositoryView(meta, existing, org, ctx.settings.publicUrl), schema: 'repository', partial: true };
  }
  if (fence !== null || existing) throw expired();
  const now = ctx.now.toISOString();
  const repo: RepoRecord = {
    id: input.repo_id,
    org_id: org.id,
    name: input.name,
    default_bookmark: input.default_bookmark,
    // The time in its id, which the org's list orders it by (repo-saga-store.ts).
    created_at: repoCreatedAt(input.repo_id),
    updated_at: now,
    tags: input.tags,
    upstream: input.upstream ? sealUpstream(ctx, input.upstream, null) : null,
    last_op_id: null,
  };
  const bookmark: BookmarkRecord = { name: repo.default_bookmark, change_id: ROOT_CHANGE_ID, created_at: now, updated_at: now };
  new LmdbRepoStore(meta, repo.id).putBookmark(bookmark);
  ctx.mutation.operation(repo, 'repo.create', { name: repo.name, default_bookmark: repo.default_bookmark });
  putRepo(meta, repo);
  setSagaFence(meta, repo.id, { saga_id: input.saga_id, applied: true });
  ctx.mutation.emit('repo.created', org, repo, { repo: repoEventView(meta, repo) });
  ctx.mutation.emit('bookmark.created', org, repo, {
    bookmark: { name: bookmark.name, is_default: true, change_id: ROOT_CHANGE_ID, commit_oid: NULL_OID },
  });
  return { status: 201, body: repositoryView(meta, repo, org, ctx.settings.publicUrl), schema: 'repository', partial: true };
});

/** An update; with a rename, step 2 of its saga (the org actor already holds the new name). */
export const updateRepo = defineCommand<UpdateRepoInput>('repo.update', (input, ctx) => {
  const { meta } = ctx.storage;
  const repo = getRepo(meta, input.repo_id);
  if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
  const org = orgOf(ctx, repo.org_id);
  const saga = input.saga_id;
  if (saga !== undefined) {
    const fence = sagaFence(meta, repo.id);
    // Already applied (a retried step): answered again, applied once.
    if (fence?.saga_id === saga && fence.applied) return { status: 200, body: repositoryView(meta, repo, org, ctx.settings.publicUrl), schema: 'repository', partial: true };
    if (fence !== null && fence.saga_id >= saga) throw expired();
    setSagaFence(meta, repo.id, { saga_id: saga, applied: true });
  }
  const before = { name: repo.name, default_bookmark: repo.default_bookmark, tags: { ...repo.tags } };

  if (input.name !== undefined) repo.name = input.name;
  if (input.default_bookmark !== undefined && input.default_bookmark !== repo.default_bookmark) {
    if (!getBookmark(meta, repo.id, input.default_bookmark)) {
      throw invalid(`default_bookmark "${input.default_bookmark}" does not name an existing bookmark`);
    }
    repo.default_bookmark = input.default_bookmark;
  }
  if (input.tags) {
    const tags = { ...repo.tags };
    for (const [k, v] of Object.entries(input.tags)) {
      if (v === null) delete tags[k];
      else tags[k] = v;
    }
    repo.tags = tags;
  }
  if (input.upstream !== undefined) {
    repo.upstream = input.upstream === null ? null : sealUpstream(ctx, input.upstream, repo.upstream);
  }
  repo.updated_at = ctx.now.toISOString();
  ctx.mutation.operation(repo, 'repo.update', { fields: Object.keys(input).filter((k) => k !== 'repo_id' && k !== 'saga_id') });
  putRepo(meta, repo);
  const after = { name: repo.name, default_bookmark: repo.default_bookmark, tags: repo.tags };
  ctx.mutation.emit('repo.updated', org, repo, { repo: repoEventView(meta, repo), before, after });
  return { status: 200, body: repositoryView(meta, repo, org, ctx.settings.publicUrl), schema: 'repository', partial: saga !== undefined };
});

/**
 * The sweeper's settling of a stale create or rename: whether its step ran here; if not, the
 * fence now refuses it, so a step still on its way cannot apply after the org released the name.
 * If it ran, the repository comes with the answer: a create's response, which the org records
 * under the request's Idempotency-Key when it confirms (repo-names.ts).
 */
export const settleRepoStep = defineCommand<SagaStepInput>('repo.settle', (input, ctx) => {
  const { meta } = ctx.storage;
  const fence = sagaFence(meta, input.repo_id);
  if (fence?.saga_id === input.saga_id) {
    const repo = fence.applied ? getRepo(meta, input.repo_id) : undefined;
    const view = repo && repositoryView(meta, repo, orgOf(ctx, repo.org_id), ctx.settings.publicUrl);
    return { status: 200, body: { ran: fence.applied, ...(view && { view }) }, schema: 'sagaStepRan' };
  }
  if (fence === null || fence.saga_id < input.saga_id) setSagaFence(meta, input.repo_id, { saga_id: input.saga_id, applied: false });
  return { status: 200, body: { ran: false }, schema: 'sagaStepRan' };
});

/** Hooks that clean up what other features keep about a repository outside its own key range. */
export type RepoDeletionHook = (ctx: CommandContext, repo: RepoRecord) => void;
const deletionHooks: RepoDeletionHook[] = [];
export function onRepoDeleted(hook: RepoDeletionHook): void {
  deletionHooks.push(hook);
}

/** Delete, step 2 (after the org's tombstone). Run again it finds nothing and succeeds. */
export const deleteRepo = defineCommand<DeleteRepoInput>('repo.delete', (input, ctx) => {
  const { meta } = ctx.storage;
  const repo = getRepo(meta, input.repo_id);
  if (!repo) return { status: 200, body: { success: true }, schema: 'success' };
  const org = orgOf(ctx, repo.org_id);
  const view = repoEventView(meta, repo);
  // Its objects go below: their bytes go back to the org's quota (the counter is in the range).
  releaseRepository(meta, org.id, repo.id);
  clearRepository(ctx.storage, repo.id);
  // The deletion's own operation is the one entry left in the repository's range: the audit
  // record of who deleted it and when, chained to the last operation before it.
  ctx.mutation.operation(repo, 'repo.delete', { name: repo.name });
  removeRepo(meta, repo.id);
  for (const hook of deletionHooks) hook(ctx, repo);
  ctx.mutation.emit('repo.deleted', org, repo, { repo: view });
  return { status: 200, body: { success: true }, schema: 'success' };
});
