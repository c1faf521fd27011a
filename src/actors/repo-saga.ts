import { isServiceError, ServiceError } from '../errors.js';
import type { RepoSagaKind, RepoSagaRecord } from '../storage/repo-saga-store.js';
import { orgActor, repoActor } from './actor-names.js';
import { SAGA_BUSY, type SagaStarted, type SettleSagaInput } from './commands/repo-names.js';
import type { CreateRepoInput, InitRepoInput, SagaStepInput, UpdateRepoInput } from './commands/repos.js';
import { faultPoint } from './fault-points.js';
import type { ActorResponse } from './runtime.js';

/**
 * The repository sagas, driven from the front end: creating, renaming and deleting a repository
 * touch the org's shard (its name index and list) and the repository's, and each command writes
 * only its own actor's shard. The request's handler runs the steps in order and answers after the
 * last; if the process dies between two, the sweeper (system/repo-saga-sweeper.ts) settles the
 * saga from its durable record on the org's shard with `settleSaga`.
 *
 * `keyed` false sends a step without the request's Idempotency-Key: settling a saga after a failed
 * step must run even though that step's error is already recorded under the key.
 *
 * A keyed step may be answered with the request's stored outcome instead (`replayed`): an earlier
 * attempt of the same request finished since the front end looked for its record (it ran on
 * another node, or the sweeper confirmed it). That outcome is then the request's answer.
 */
export type StepCall = (actor: string, command: string, input: unknown, keyed?: boolean, blobs?: Uint8Array[]) => Promise<ActorResponse>;

const parse = <T>(reply: ActorResponse): T => JSON.parse(Buffer.from(reply.body).toString('utf8')) as T;

/** How long a rename or delete waits for another saga of the same repository to end. */
const BUSY_WAIT_MS = 2000;
const BUSY_POLL_MS = 10;

/**
 * Starts a rename or delete of the repository by its current name (`nameOf`, read again on each
 * attempt): it waits while another saga of the repository runs (they end in moments), and follows
 * a rename that finished since the request looked the repository up. Answers the step's reply.
 */
async function startWhenFree(call: StepCall, actor: string, command: string, nameOf: () => string | undefined, input: (name: string) => unknown): Promise<ActorResponse> {
  const deadline = Date.now() + BUSY_WAIT_MS;
  for (;;) {
    const name = nameOf();
    if (name === undefined) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    try {
      return await call(actor, command, input(name));
    } catch (err) {
      if (!isServiceError(err) || Date.now() > deadline) throw err;
      const renamed = err.code === 'REPO_NOT_FOUND' && nameOf() !== name;
      if (err.message !== SAGA_BUSY && !renamed) throw err;
      if (!renamed) await new Promise((resolve) => setTimeout(resolve, BUSY_POLL_MS));
    }
  }
}

/**
 * Runs the repository's step of a started saga. If it fails (refused, or its worker died), or is
 * answered with the error an earlier attempt of the request recorded there, the saga is settled at
 * once, as the sweeper would later, so the name is not held for its bound.
 */
async function repositoryStep(call: StepCall, saga: RepoSagaRecord, command: string, input: unknown): Promise<ActorResponse> {
  const settle = () => settleSaga((actor, cmd, body) => call(actor, cmd, body, false), saga).catch(() => undefined);
  let reply: ActorResponse;
  try {
    reply = await call(repoActor(saga.repo_id), command, input);
  } catch (err) {
    await settle();
    throw err;
  }
  if (reply.replayed) await settle();
  return reply;
}

/** The saga's record as the org's step wrote it (what `settleSaga` needs). */
function sagaRecord(kind: RepoSagaKind, orgId: string, started: SagaStarted, from: string | null): RepoSagaRecord {
  return { id: started.saga_id, kind, org_id: orgId, repo_id: started.repo_id, name: started.name, from, at: '' };
}

/**
 * Reserve the name (org) → initialise (repository) → confirm (org); the reply is the 201. A repeat
 * of a request whose create is unfinished takes its saga up again (repo-names.ts), so every
 * attempt under one Idempotency-Key answers the same repository.
 */
export async function createRepository(call: StepCall, input: CreateRepoInput): Promise<ActorResponse> {
  const org = orgActor(input.org_id);
  const reserved = await call(org, 'repo.reserve', { org_id: input.org_id, name: input.name });
  if (reserved.replayed) return reserved;
  const started = parse<SagaStarted>(reserved);
  faultPoint('repo.create:after-reserve');
  const init: InitRepoInput = { ...input, repo_id: started.repo_id, name: started.name, saga_id: started.saga_id };
  const made = await repositoryStep(call, sagaRecord('create', input.org_id, started, null), 'repo.init', init);
  if (made.replayed) return made;
  faultPoint('repo.create:after-init');
  const confirm: SettleSagaInput = { org_id: input.org_id, saga_id: started.saga_id, reply: { status: made.status, view: parse(made) } };
  return call(org, 'repo.confirm', confirm);
}

/**
 * An update. A rename is a saga: hold the new name (org) → update the record (repository) →
 * move the index to the new name (org). Other fields are the repository's alone: one step.
 */
export async function updateRepository(call: StepCall, orgId: string, nameOf: () => string | undefined, input: UpdateRepoInput): Promise<ActorResponse> {
  const repo = repoActor(input.repo_id);
  const name = input.name;
  if (name === undefined || name === nameOf()) return call(repo, 'repo.update', input);
  let from = '';
  const reserved = await startWhenFree(call, orgActor(orgId), 'repo.rename', nameOf, (current) => {
    from = current;
    return { org_id: orgId, repo_id: input.repo_id, from, name };
  });
  if (reserved.replayed) return reserved;
  const started = parse<SagaStarted>(reserved);
  faultPoint('repo.rename:after-reserve');
  const updated = await repositoryStep(call, sagaRecord('rename', orgId, started, from), 'repo.update', { ...input, saga_id: started.saga_id });
  if (updated.replayed) return updated;
  faultPoint('repo.rename:after-update');
  return call(orgActor(orgId), 'repo.confirm', { org_id: orgId, saga_id: started.saga_id, reply: { status: updated.status, view: parse(updated) } });
}

/** Tombstone the name (org) → delete the repository's data (repository) → free the name (org). */
export async function deleteRepository(call: StepCall, orgId: string, repoId: string, nameOf: () => string | undefined): Promise<ActorResponse> {
  const org = orgActor(orgId);
  const started = parse<SagaStarted>(await startWhenFree(call, org, 'repo.retire', nameOf, (name) => ({ org_id: orgId, repo_id: repoId, name })));
  faultPoint('repo.delete:after-retire');
  await repositoryStep(call, sagaRecord('delete', orgId, started, null), 'repo.delete', { repo_id: repoId });
  faultPoint('repo.delete:after-delete');
  const settle: SettleSagaInput = { org_id: orgId, saga_id: started.saga_id, reply: null };
  return call(org, 'repo.confirm', settle);
}

/**
 * Finishes a saga whose driver is gone: a delete always goes forward (its name already finds
 * nothing); a create or rename is confirmed if its repository step ran and undone if not (the
 * repository's actor then refuses that step for good). Returns what was done.
 */
export async function settleSaga(call: StepCall, saga: RepoSagaRecord): Promise<'finished' | 'undone'> {
  const org = orgActor(saga.org_id);
  const repo = repoActor(saga.repo_id);
  const settle: SettleSagaInput = { org_id: saga.org_id, saga_id: saga.id, reply: null };
  if (saga.kind === 'delete') {
    await call(repo, 'repo.delete', { repo_id: saga.repo_id });
    await call(org, 'repo.confirm', settle);
    return 'finished';
  }
  const step: SagaStepInput = { repo_id: saga.repo_id, saga_id: saga.id };
  const { ran, view } = parse<{ ran: boolean; view?: Record<string, unknown> }>(await call(repo, 'repo.settle', step));
  if (!ran) {
    await call(org, 'repo.release', settle);
    return 'undone';
  }
  // A create is confirmed with its response, which the org records under the request's key.
  await call(org, 'repo.confirm', saga.kind === 'create' && view ? { ...settle, reply: { status: 201, view } } : settle);
  return 'finished';
}
