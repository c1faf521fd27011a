import { randomInt } from 'node:crypto';
import { ServiceError, invalid } from '../../errors.js';
import { newId } from '../../storage/ids.js';
import { NULL_OID } from '../../vcs/ids.js';
import { releaseRepository } from '../../storage/quota.js';
import type { BookmarkRecord, OrgRecord, RepoRecord, UpstreamRecord } from '../../storage/records.js';
import { noteReleasedName } from '../../storage/released-names.js';
import { clearRepository, getBookmark, getRepo, getRepoByName, indexRepo, isRepoNameTaken, putBookmark, putRepo, renameRepo, ROOT_CHANGE_ID, unindexRepo } from '../../storage/repo-store.js';
import { repoEventView, repositoryView } from '../../protocol/views/repository.js';
import { defineCommand, type CommandContext } from '../command.js';
import type { UpstreamInput } from '../../protocol/schemas/repos.js';

/**
 * Repository lifecycle commands. They run in the org's actor so that name uniqueness holds under
 * any concurrency: the name check and the insert are one step of a single writer.
 */
export interface CreateRepoInput {
  org_id: string;
  name: string | null;
  default_bookmark: string;
  tags: Record<string, string>;
  upstream: UpstreamInput | null;
}

export interface UpdateRepoInput {
  repo_id: string;
  name?: string;
  default_bookmark?: string;
  tags?: Record<string, string | null>;
  /** Absent: unchanged; null: removed; object: replaced (auth omitted keeps the credential for the same origin). */
  upstream?: UpstreamInput | null;
}

export interface DeleteRepoInput {
  repo_id: string;
}

function orgOf(ctx: CommandContext, orgId: string): OrgRecord {
  const org = ctx.directory.org(orgId);
  if (!org) throw new ServiceError('NOT_FOUND', 'organization not found');
  return org;
}

function generatedName(ctx: CommandContext, orgId: string): string {
  for (;;) {
    let name = 'repo-';
    for (let i = 0; i < 8; i++) name += String.fromCharCode(97 + randomInt(26));
    if (!isRepoNameTaken(ctx.storage.meta, orgId, name)) return name;
  }
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

export const createRepo = defineCommand<CreateRepoInput>('repo.create', (input, ctx) => {
  const { meta } = ctx.storage;
  const org = orgOf(ctx, input.org_id);
  const name = input.name ?? generatedName(ctx, org.id);
  const existing = getRepoByName(meta, org.id, name);
  if (existing) throw new ServiceError('REPO_EXISTS', `a repository named "${existing.name}" already exists`);
  const now = ctx.now.toISOString();
  const repo: RepoRecord = {
    id: newId('repo'),
    org_id: org.id,
    name,
    default_bookmark: input.default_bookmark,
    created_at: now,
    updated_at: now,
    tags: input.tags,
    upstream: input.upstream ? sealUpstream(ctx, input.upstream, null) : null,
    last_op_id: null,
  };
  const bookmark: BookmarkRecord = { name: repo.default_bookmark, change_id: ROOT_CHANGE_ID, created_at: now, updated_at: now };
  putBookmark(meta, repo.id, bookmark);
  indexRepo(meta, repo);
  ctx.mutation.operation(repo, 'repo.create', { name, default_bookmark: repo.default_bookmark });
  putRepo(meta, repo);
  ctx.mutation.emit('repo.created', org, repo, { repo: repoEventView(meta, repo) });
  ctx.mutation.emit('bookmark.created', org, repo, {
    bookmark: { name: bookmark.name, is_default: true, change_id: ROOT_CHANGE_ID, commit_oid: NULL_OID },
  });
  return { status: 201, body: repositoryView(meta, repo, org, ctx.settings.publicUrl), schema: 'repository' };
});

export const updateRepo = defineCommand<UpdateRepoInput>('repo.update', (input, ctx) => {
  const { meta } = ctx.storage;
  const repo = getRepo(meta, input.repo_id);
  if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
  const org = orgOf(ctx, repo.org_id);
  const before = { name: repo.name, default_bookmark: repo.default_bookmark, tags: { ...repo.tags } };

  if (input.name !== undefined && input.name !== repo.name) {
    const clash = getRepoByName(meta, org.id, input.name);
    if (clash && clash.id !== repo.id) throw new ServiceError('REPO_EXISTS', `a repository named "${clash.name}" already exists`);
    renameRepo(meta, repo, input.name);
    noteReleasedName(meta, org.id, repo.name, repo.id, ctx.now.getTime());
    repo.name = input.name;
  }
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
  ctx.mutation.operation(repo, 'repo.update', { fields: Object.keys(input).filter((k) => k !== 'repo_id') });
  putRepo(meta, repo);
  const after = { name: repo.name, default_bookmark: repo.default_bookmark, tags: repo.tags };
  ctx.mutation.emit('repo.updated', org, repo, { repo: repoEventView(meta, repo), before, after });
  return { status: 200, body: repositoryView(meta, repo, org, ctx.settings.publicUrl), schema: 'repository' };
});

/** Hooks that clean up what other features keep about a repository outside its own key range. */
export type RepoDeletionHook = (ctx: CommandContext, repo: RepoRecord) => void;
const deletionHooks: RepoDeletionHook[] = [];
export function onRepoDeleted(hook: RepoDeletionHook): void {
  deletionHooks.push(hook);
}

export const deleteRepo = defineCommand<DeleteRepoInput>('repo.delete', (input, ctx) => {
  const { meta } = ctx.storage;
  const repo = getRepo(meta, input.repo_id);
  if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
  const org = orgOf(ctx, repo.org_id);
  const view = repoEventView(meta, repo);
  // Its objects go below: their bytes go back to the org's quota (the counter is in the range).
  releaseRepository(meta, org.id, repo.id);
  clearRepository(ctx.storage, repo.id);
  // The deletion's own operation is the one entry left in the repository's range: the audit
  // record of who deleted it and when, chained to the last operation before it.
  ctx.mutation.operation(repo, 'repo.delete', { name: repo.name });
  unindexRepo(meta, repo);
  noteReleasedName(meta, org.id, repo.name, repo.id, ctx.now.getTime());
  for (const hook of deletionHooks) hook(ctx, repo);
  ctx.mutation.emit('repo.deleted', org, repo, { repo: view });
  return { status: 200, body: { success: true }, schema: 'success' };
});
