import { randomInt } from 'node:crypto';
import { ServiceError, keyReused } from '../../errors.js';
import { serialize } from '../../protocol/serializers.js';
import { loadOutcome, saveOutcome } from '../../storage/idempotency-store.js';
import { newId } from '../../storage/ids.js';
import { getRepo, isRepoNameTaken } from '../../storage/repo-store.js';
import {
  beginSaga,
  finishSaga,
  getSaga,
  isListed,
  nameEntry,
  sagaOfRepo,
  sagaOfRequest,
  undoSaga,
  unlistRepo,
  type RepoSagaKind,
  type RepoSagaRecord,
  type SagaRequest,
} from '../../storage/repo-saga-store.js';
import { noteReleasedName } from '../../storage/released-names.js';
import { orgShard } from '../../storage/shards.js';
import { defineCommand, type CommandContext, type CommandResult } from '../command.js';
import { orgOf } from './org-of.js';

/**
 * The org actor's steps of the repository sagas (actors/repo-saga.ts): the name index and the
 * org's list live on the org's shard, so name uniqueness is still one step of a single writer.
 * Every step here writes only org-shard keys; the repository's own steps are in repos.ts.
 */
export interface ReserveRepoInput {
  org_id: string;
  /** null: a generated name. */
  name: string | null;
}

export interface RenameRepoInput {
  org_id: string;
  repo_id: string;
  /** The name the request found the repository by. */
  from: string;
  name: string;
}

export interface RetireRepoInput {
  org_id: string;
  repo_id: string;
  name: string;
}

export interface SettleSagaInput {
  org_id: string;
  saga_id: string;
  /**
   * The request's response, made by the repository's step: returned, and recorded under the
   * request's Idempotency-Key. A settled create's is the repository as its step made it; null for
   * other settled sagas (nobody is waiting).
   */
  reply: { status: number; view: Record<string, unknown> } | null;
}

/** What a started saga tells its driver. */
export interface SagaStarted {
  saga_id: string;
  repo_id: string;
  name: string;
}

function generatedName(ctx: CommandContext, orgId: string): string {
  for (;;) {
    let name = 'repo-';
    for (let i = 0; i < 8; i++) name += String.fromCharCode(97 + randomInt(26));
    if (!isRepoNameTaken(ctx.storage.meta, orgId, name)) return name;
  }
}

/** Refuses a name another repository has or a saga holds, quoting it in its casing. */
function assertNameFree(ctx: CommandContext, orgId: string, name: string, repoId: string | null): void {
  const entry = nameEntry(ctx.storage.meta, orgId, name);
  if (entry === undefined || entry === repoId) return;
  // A repository's casing is in its record (on its own shard: a read, never a write).
  const taken = typeof entry === 'string' ? (getRepo(ctx.storage.meta, entry)?.name ?? name) : entry.name;
  throw new ServiceError('REPO_EXISTS', `a repository named "${taken}" already exists`);
}

/** The refusal of a rename or delete while another saga of the repository runs (repo-saga.ts waits on it). */
export const SAGA_BUSY = 'the repository is being renamed or deleted; retry';

/** Refuses a rename or delete while another saga of the repository runs (it ends within moments). */
function assertNoSaga(ctx: CommandContext, orgId: string, repoId: string): void {
  if (sagaOfRepo(ctx.storage.meta, orgId, repoId)) {
    throw new ServiceError('UNAVAILABLE', SAGA_BUSY, undefined, { retryAfter: 1 });
  }
}

function start(ctx: CommandContext, kind: RepoSagaKind, orgId: string, repoId: string, name: string, from: string | null, request?: SagaRequest): CommandResult {
  const saga: RepoSagaRecord = { id: newId('saga'), kind, org_id: orgId, repo_id: repoId, name, from, at: ctx.now.toISOString(), ...(request && { request }) };
  beginSaga(ctx.storage.meta, saga);
  return started(saga);
}

/** Not the request's response: an Idempotency-Key records the confirm's (or this step's error). */
function started(saga: RepoSagaRecord): CommandResult {
  const body: SagaStarted = { saga_id: saga.id, repo_id: saga.repo_id, name: saga.name };
  return { status: 200, body, schema: 'sagaStarted', partial: true };
}

/**
 * The unfinished create this request started before, under the same Idempotency-Key: its first
 * attempt was answered 503 or not at all (a shard moved, a node died, the confirm was lost), or it
 * is still being driven from another node. Taken up again, it is not a clash with its own claim:
 * the repository's step answers what it did, and the confirm records the response. The same key
 * with another request is refused as the contract says.
 */
function sagaOfThisRequest(ctx: CommandContext, orgId: string): RepoSagaRecord | undefined {
  const idem = ctx.idempotency;
  if (!idem) return undefined;
  const saga = sagaOfRequest(ctx.storage.meta, orgId, idem.keyId, idem.key);
  if (saga && saga.request!.fingerprint !== idem.fingerprint) throw keyReused();
  return saga;
}

/** Create, step 1: the name and a new repository id, held until the repository exists. */
export const reserveRepo = defineCommand<ReserveRepoInput>('repo.reserve', (input, ctx) => {
  const org = orgOf(ctx, input.org_id);
  const resumed = sagaOfThisRequest(ctx, org.id);
  if (resumed) return started(resumed);
  const name = input.name ?? generatedName(ctx, org.id);
  assertNameFree(ctx, org.id, name, null);
  const idem = ctx.idempotency;
  return start(ctx, 'create', org.id, newId('repo'), name, null, idem ? { key_id: idem.keyId, key: idem.key, fingerprint: idem.fingerprint } : undefined);
});

/** Rename, step 1: the new name is held (the old one still finds the repository). */
export const renameRepo = defineCommand<RenameRepoInput>('repo.rename', (input, ctx) => {
  const { meta } = ctx.storage;
  // First: during another rename the record's name (what `from` was read from) runs ahead of the index.
  assertNoSaga(ctx, input.org_id, input.repo_id);
  if (nameEntry(meta, input.org_id, input.from) !== input.repo_id) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
  assertNameFree(ctx, input.org_id, input.name, input.repo_id);
  // Noted at once, even if the saga is later undone: a repeat then merely looks on one more shard.
  if (input.from.toLowerCase() !== input.name.toLowerCase()) noteReleasedName(meta, input.org_id, input.from, input.repo_id, ctx.now.getTime());
  return start(ctx, 'rename', input.org_id, input.repo_id, input.name, input.from);
});

/** Delete, step 1: the tombstone. The name stays taken but finds nothing; the list drops it. */
export const retireRepo = defineCommand<RetireRepoInput>('repo.retire', (input, ctx) => {
  const { meta } = ctx.storage;
  assertNoSaga(ctx, input.org_id, input.repo_id);
  if (nameEntry(meta, input.org_id, input.name) !== input.repo_id || !isListed(meta, input.org_id, input.repo_id)) {
    throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
  }
  unlistRepo(meta, input.org_id, input.repo_id);
  noteReleasedName(meta, input.org_id, input.name, input.repo_id, ctx.now.getTime());
  return start(ctx, 'delete', input.org_id, input.repo_id, input.name, null);
});

/** The last step of every saga once the repository's step has run: the org's indexes follow it. */
export const confirmRepoSaga = defineCommand<SettleSagaInput>('repo.confirm', (input, ctx) => {
  const saga = getSaga(ctx.storage.meta, input.org_id, input.saga_id);
  // Absent: the sweeper confirmed it first (it finds sagas older than its bound).
  // The repository's own `created_at` where the reply has it (one made by an older build's step differs from its id's time).
  if (saga) finishSaga(ctx.storage.meta, saga, typeof input.reply?.view.created_at === 'string' ? input.reply.view.created_at : undefined);
  if (!input.reply) return { status: 200, body: { success: true }, schema: 'success' };
  // Settled without the request (the sweeper, or the request itself after a failed step): the
  // response is recorded here, as the request's own confirm has the mailbox record it.
  if (saga?.request && !ctx.idempotency) recordResponse(ctx, saga.org_id, saga.request, input.reply);
  return { status: input.reply.status, body: input.reply.view, schema: 'repository' };
});

/** Records a saga's response under its request's key on the org's shard, unless something is recorded there. */
function recordResponse(ctx: CommandContext, orgId: string, request: SagaRequest, reply: NonNullable<SettleSagaInput['reply']>): void {
  const shard = orgShard(orgId);
  const now = ctx.now.getTime();
  if (loadOutcome(ctx.storage.meta, ctx.secrets, shard, request.key_id, request.key, now)) return;
  const outcome = { fingerprint: request.fingerprint, status: reply.status, body: serialize('repository', reply.view) };
  saveOutcome(ctx.storage, ctx.secrets, shard, request.key_id, request.key, outcome, now);
}

/** Undoes a create or rename whose repository step did not run (the sweeper, or a refused step). */
export const releaseRepoSaga = defineCommand<SettleSagaInput>('repo.release', (input, ctx) => {
  const saga = getSaga(ctx.storage.meta, input.org_id, input.saga_id);
  if (saga && saga.kind !== 'delete') undoSaga(ctx.storage.meta, saga);
  return { status: 200, body: { success: true }, schema: 'success' };
});

export const repoNameCommands = [reserveRepo, renameRepo, retireRepo, confirmRepoSaga, releaseRepoSaga];
