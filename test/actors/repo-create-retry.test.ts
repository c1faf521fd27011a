import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceError, isServiceError } from '../../src/errors.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { K, Ranges } from '../../src/storage/keys.js';
import type { NameClaim, RepoSagaRecord } from '../../src/storage/repo-saga-store.js';
import type { RepoRecord } from '../../src/storage/records.js';
import type { CreateRepoInput } from '../../src/actors/commands/repos.js';
import { createRepository, settleSaga, type StepCall } from '../../src/actors/repo-saga.js';
import { fixture, principal, startRuntime } from './runtime.js';

/**
 * A repository create retried under the same Idempotency-Key after its first attempt was cut short
 * between the saga's steps, as a shard moving between nodes, a failover or a killed driver cuts
 * it: the retry reaches the actors without the front end having found a recorded response (the
 * record is not written yet, or the first attempt still runs on another node). Every retry must
 * answer 201 with the repository the first attempt started, never 409 REPO_EXISTS from its own
 * claim, and never make a second repository. The steps run on the real actor runtime and LMDB;
 * what a lost hop does is played by the step caller of the first attempt.
 */
const dataDir = mkdtempSync(join(tmpdir(), 'repohost-create-retry-'));
const storage = openStorage(dataDir);
const directory = new LmdbOrgDirectory(storage);
const org = createOrg(directory, 'acme');
const rt = startRuntime({ dataDir, workers: 1, commandsModule: fixture('repo-commands'), onSettled: () => storage.root.resetReadTxn() });
t.teardown(async () => {
  await storage.close();
  await rt.cleanup();
});

type Outcome = { status: number; text: string; json: any; code?: string };

/** A step caller sending every step under the request's key, as the front end does. */
const keyed =
  (key: string, fingerprint: string): StepCall =>
  (actor, command, input, withKey = true) =>
    rt.runtime.call({ actor, command, input, principal: principal(org.id), traceId: 'trace', idempotency: withKey ? { keyId: 'key_test', key, fingerprint } : undefined });

/** The sweeper's caller: no request, no key. */
const sweeper: StepCall = (actor, command, input) => rt.runtime.call({ actor, command, input, principal: principal(org.id), traceId: 'sweep' });

/** What the route answers: the saga's reply, or its error as the client sees it. */
async function attempt(call: StepCall, input: CreateRepoInput): Promise<Outcome> {
  try {
    const r = await createRepository(call, input);
    const text = Buffer.from(r.body).toString('utf8');
    return { status: r.status, text, json: JSON.parse(text) };
  } catch (err) {
    if (isServiceError(err)) return { status: err.status, text: '', json: null, code: err.code };
    throw err;
  }
}

/** The 503 a step gets when its shard is moving: the owner it was sent to no longer serves it. */
const moving = (): ServiceError => new ServiceError('UNAVAILABLE', 'the shard is not served here now', undefined, { retryAfter: 1 });

/** `call`, except that `command` is refused as a moving shard refuses it, before it runs. */
const refusing =
  (call: StepCall, command: string): StepCall =>
  (actor, cmd, input, withKey) =>
    cmd === command ? Promise.reject(moving()) : call(actor, cmd, input, withKey);

const createInput = (name: string | null, tags: Record<string, string> = {}): CreateRepoInput => ({ org_id: org.id, name, default_bookmark: 'main', tags, upstream: null });
const claimOf = (name: string): NameClaim => storage.meta.get(K.repoName(org.id, name)) as NameClaim;
const listed = (): string[] => [...storage.meta.getRange(Ranges.orgRepos(org.id))].map(({ key }) => (key as string[]).at(-1)!);
const sagas = (): RepoSagaRecord[] => [...storage.meta.getRange(Ranges.orgSagas(org.id))].map(({ value }) => value as RepoSagaRecord);

/** The repository is whole under its name, listed once, with its one creating operation. */
function whole(t: Test, id: string, name: string): void {
  const repo = storage.meta.get(K.repo(id)) as RepoRecord | undefined;
  t.equal(repo?.name, name, `${name}: the record`);
  t.equal(storage.meta.get(K.repoName(org.id, name)), id, `${name}: the name finds it`);
  t.equal(listed().filter((r) => r === id).length, 1, `${name}: listed once`);
  t.same([...storage.meta.getRange(Ranges.operations(id))].map(({ value }) => (value as { kind: string }).kind), ['repo.create'], `${name}: created once`);
  t.same(sagas().filter((s) => s.repo_id === id), [], `${name}: no saga left`);
}

t.test('the confirm did not reach the org (its shard moved): the retry takes the saga up and answers 201', async (t) => {
  const call = keyed('confirm-lost', 'fp-confirm-lost');
  const first = await attempt(refusing(call, 'repo.confirm'), createInput('Moved'));
  t.equal(first.status, 503, 'the first attempt is answered 503');
  const claim = claimOf('moved');
  t.ok(storage.meta.get(K.repo(claim.repo_id)), 'its repository step ran; the name is still its claim');
  const retry = await attempt(call, createInput('Moved'));
  t.equal(retry.status, 201, `the retry is answered 201 (${retry.code ?? ''})`);
  t.equal(retry.json.id, claim.repo_id, 'with the repository the first attempt made');
  whole(t, claim.repo_id, 'Moved');
  const again = await attempt(call, createInput('Moved'));
  t.equal(again.status, 201);
  t.equal(again.text, retry.text, 'a further retry replays the same response, byte for byte');
});

t.test('two attempts at once (the first still driven by the old owner): both answer the same 201', async (t) => {
  const call = keyed('two-drivers', 'fp-two-drivers');
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let reachedConfirm!: () => void;
  const atConfirm = new Promise<void>((resolve) => (reachedConfirm = resolve));
  const slow: StepCall = async (actor, command, input, withKey) => {
    if (command === 'repo.confirm') {
      reachedConfirm();
      await held;
    }
    return call(actor, command, input, withKey);
  };
  const first = attempt(slow, createInput('Twice'));
  await atConfirm;
  const second = await attempt(call, createInput('Twice'));
  t.equal(second.status, 201, `the retry is answered 201 (${second.code ?? ''})`);
  release();
  const firstDone = await first;
  t.equal(firstDone.status, 201, `the first attempt's confirm then answers 201 too (${firstDone.code ?? ''})`);
  t.equal(firstDone.text, second.text, 'the same response');
  whole(t, second.json.id, 'Twice');
});

t.test("the repository's step ran but its answer was lost: the saga settled at once records the 201", async (t) => {
  const call = keyed('init-lost', 'fp-init-lost');
  const lostReply: StepCall = async (actor, command, input, withKey) => {
    const reply = await call(actor, command, input, withKey);
    if (command === 'repo.init') throw moving();
    return reply;
  };
  const first = await attempt(lostReply, createInput('Landed'));
  t.equal(first.status, 503, 'the first attempt is answered 503');
  const id = storage.meta.get(K.repoName(org.id, 'landed')) as string;
  t.type(id, 'string', 'the request confirmed its saga while settling it');
  const retry = await attempt(call, createInput('Landed'));
  t.equal(retry.status, 201, `the retry is answered 201 (${retry.code ?? ''})`);
  t.equal(retry.json.id, id, 'with that repository');
  t.equal(retry.json.name, 'Landed');
  whole(t, id, 'Landed');
});

t.test('the sweeper confirmed the saga first: the retry answers the 201 it recorded', async (t) => {
  const call = keyed('swept', 'fp-swept');
  t.equal((await attempt(refusing(call, 'repo.confirm'), createInput('Swept', { team: 'a' }))).status, 503);
  const [saga] = sagas().filter((s) => s.name === 'Swept');
  t.equal(await settleSaga(sweeper, saga!), 'finished', 'the sweeper confirms it (its repository step ran)');
  const retry = await attempt(call, createInput('Swept', { team: 'a' }));
  t.equal(retry.status, 201, `the retry is answered 201 (${retry.code ?? ''})`);
  t.equal(retry.json.id, saga!.repo_id);
  t.same(retry.json.tags, { team: 'a' }, 'the repository as its step made it');
  whole(t, saga!.repo_id, 'Swept');
});

t.test('a generated name: the retry answers the same repository, not a second one', async (t) => {
  const call = keyed('generated', 'fp-generated');
  const open = new Set(sagas().map((s) => s.id));
  t.equal((await attempt(refusing(call, 'repo.confirm'), createInput(null))).status, 503);
  const [first] = sagas().filter((s) => !open.has(s.id));
  const retry = await attempt(call, createInput(null));
  t.equal(retry.status, 201);
  t.equal(retry.json.id, first?.repo_id, 'the repository the first attempt made, under the name it drew');
  t.equal(retry.json.name, first?.name);
  t.same(sagas().filter((s) => !open.has(s.id)), [], 'and no other saga holds a name');
  whole(t, retry.json.id, retry.json.name);
});

t.test('the same key with another request: 409 ABORTED while the saga is unfinished and after', async (t) => {
  const call = keyed('reused', 'fp-reused');
  const other = keyed('reused', 'fp-another-body');
  t.equal((await attempt(refusing(call, 'repo.confirm'), createInput('Kept'))).status, 503);
  const during = await attempt(other, createInput('Kept', { other: 'body' }));
  t.equal(during.code, 'ABORTED', 'refused while the first request is unfinished');
  const retry = await attempt(call, createInput('Kept'));
  t.equal(retry.status, 201, 'the first request still completes');
  const after = await attempt(other, createInput('Kept', { other: 'body' }));
  t.equal(after.code, 'ABORTED', 'and is refused after it');
  const renamed = await attempt(other, createInput('Elsewhere'));
  t.equal(renamed.code, 'ABORTED', 'whatever the other body names');
  t.equal(storage.meta.get(K.repoName(org.id, 'elsewhere')), undefined, 'which is not created');
  whole(t, retry.json.id, 'Kept');
});

t.test('a retry after the saga was undone (its repository step never ran) creates the repository afresh', async (t) => {
  const call = keyed('undone', 'fp-undone');
  t.equal((await attempt(refusing(call, 'repo.init'), createInput('Fresh'))).status, 503, 'the repository step is refused; the saga is released');
  t.equal(storage.meta.get(K.repoName(org.id, 'fresh')), undefined, 'the name is free');
  const retry = await attempt(call, createInput('Fresh'));
  t.equal(retry.status, 201);
  whole(t, retry.json.id, 'Fresh');
});
