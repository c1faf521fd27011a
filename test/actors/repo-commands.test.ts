import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isServiceError } from '../../src/errors.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { K, Ranges } from '../../src/storage/keys.js';
import type { BookmarkRecord, EventEnvelope, OperationRecord, OrgRecord, RepoRecord } from '../../src/storage/records.js';
import type { CreateRepoInput, UpdateRepoInput } from '../../src/actors/commands/repos.js';
import { createRepository, deleteRepository, settleSaga, updateRepository, type StepCall } from '../../src/actors/repo-saga.js';
import type { RepoSagaRecord } from '../../src/storage/repo-saga-store.js';
import { fixture, principal, startRuntime } from './runtime.js';
import { outboxEvents } from '../helpers/outbox.js';

/**
 * The repository lifecycle sagas against the real actor runtime and LMDB, with no system actor
 * draining the outbox: each step's writes (the org's indexes; the repository's record,
 * operation-log entry and outbox events) appear together, in one transaction per drained batch,
 * or not at all. The org has a webhook target
 * (events are only stored for orgs that have one); a second org without targets stores none.
 */
const ROOT = 'z'.repeat(32);
const SECRET = 'tok_upstream_secret_55aa';

const dataDir = mkdtempSync(join(tmpdir(), 'repohost-storage-'));
const storage = openStorage(dataDir);
const directory = new LmdbOrgDirectory(storage);
const org = createOrg(directory, 'acme');
const quiet = createOrg(directory, 'quiet');
directory.putTarget({
  id: 'wht_test',
  org_id: org.id,
  name: 'all events',
  url: 'https://93.184.215.14/hook',
  events: ['repo.created'],
  repo_ids: null,
  sealed_secret: 'unused',
  created_at: new Date(0).toISOString(),
  updated_at: new Date(0).toISOString(),
});
const batches: number[] = [];
const rt = startRuntime({
  dataDir,
  workers: 1,
  commandsModule: fixture('repo-commands'),
  onBatch: (b) => b.batchSize > 0 && batches.push(b.batchSize),
  onSettled: () => storage.root.resetReadTxn(),
});
t.teardown(async () => {
  await storage.close();
  await rt.cleanup();
});

type Outcome = { status: number; json: any; code?: string };

async function outcome(run: (call: StepCall) => Promise<{ status: number; body: Uint8Array }>, asOrg: OrgRecord): Promise<Outcome> {
  const call: StepCall = (actor, command, input) => rt.runtime.call({ actor, command, input, principal: { ...principal(asOrg.id), orgSlug: asOrg.slug }, traceId: 'trace' });
  try {
    const r = await run(call);
    return { status: r.status, json: JSON.parse(Buffer.from(r.body).toString('utf8')) };
  } catch (err) {
    if (isServiceError(err)) return { status: err.status, json: null, code: err.code };
    throw err;
  }
}

const create = (input: CreateRepoInput, asOrg: OrgRecord = org): Promise<Outcome> => outcome((call) => createRepository(call, input), asOrg);
const update = (name: string, input: UpdateRepoInput): Promise<Outcome> => outcome((call) => updateRepository(call, org.id, () => name, input), org);
const remove = (id: string, name: string): Promise<Outcome> => outcome((call) => deleteRepository(call, org.id, id, () => name), org);

const createInput = (name: string | null, extra: Partial<CreateRepoInput> = {}): CreateRepoInput => ({ org_id: org.id, name, default_bookmark: 'main', tags: {}, upstream: null, ...extra });
const events = (repoId: string): EventEnvelope[] => outboxEvents(storage.meta).filter((e) => e.repository?.id === repoId);
const ops = (repoId: string): OperationRecord[] => [...storage.meta.getRange(Ranges.operations(repoId))].map(({ value }) => value as OperationRecord);

/** Record ↔ name index ↔ org list and its orders ↔ default bookmark, all present. */
function consistent(t: Test, repo: RepoRecord): void {
  t.equal(storage.meta.get(K.repoName(org.id, repo.name)), repo.id, `${repo.name}: name index`);
  t.same(storage.meta.get(K.orgRepo(org.id, repo.id)), { name: repo.name.toLowerCase(), created_at: repo.created_at }, `${repo.name}: org list`);
  t.equal(storage.meta.get(K.orgRepoByName(org.id, repo.name.toLowerCase(), repo.id)), true, `${repo.name}: listed by name`);
  t.equal(storage.meta.get(K.orgRepoByCreated(org.id, repo.created_at, repo.id)), true, `${repo.name}: listed by creation time`);
  const bm = storage.meta.get(K.bookmark(repo.id, repo.default_bookmark)) as BookmarkRecord | undefined;
  t.equal(bm?.change_id, ROOT, `${repo.name}: default bookmark at the virtual root`);
}

t.test('repo.create - record, indexes, default bookmark, operation and both events, one transaction per step', async (t) => {
  const before = (storage.root.getStats() as { lastTxnId: number }).lastTxnId;
  const res = await create(createInput('One', { tags: { team: 'x' }, upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token', token: SECRET } } }));
  t.equal(res.status, 201);
  t.equal((storage.root.getStats() as { lastTxnId: number }).lastTxnId, before + 3, 'reserve (org), init (repository), confirm (org)');
  t.equal(storage.meta.getKeysCount(Ranges.orgSagas(org.id)), 0, 'the saga is finished');
  const repo = storage.meta.get(K.repo(res.json.id)) as RepoRecord;
  t.equal(repo.name, 'One');
  t.equal(storage.meta.get(K.repoName(org.id, 'one')), repo.id, 'the name index is lowercased');
  consistent(t, repo);
  const [op, ...moreOps] = ops(repo.id);
  t.equal(moreOps.length, 0);
  t.equal(op!.kind, 'repo.create');
  t.equal(op!.parent, null);
  t.equal(op!.key_id, 'key_test');
  t.equal(repo.last_op_id, op!.id, 'the record points at its operation');
  const evts = events(repo.id);
  t.same(evts.map((e) => e.type), ['repo.created', 'bookmark.created']);
  t.equal(evts[0]!.occurred_at, evts[1]!.occurred_at);
  t.same(evts[0]!.data, { repo: { id: repo.id, name: 'One', default_bookmark: 'main', head_change_id: ROOT, created_at: repo.created_at, tags: { team: 'x' } } });
  t.same(evts[1]!.data, { bookmark: { name: 'main', is_default: true, change_id: ROOT, commit_oid: '0'.repeat(40) } });
  t.same(evts[0]!.organization, { id: org.id, slug: 'acme', name: 'acme' });
  t.same(evts[0]!.repository, { id: repo.id, name: 'One', url: 'http://localhost:0/v1/acme/One' });
  t.notMatch(JSON.stringify(evts), SECRET, 'no credential in events');
  t.notMatch(JSON.stringify(op), SECRET, 'no credential in the operation log');
  t.equal(res.json.upstream.auth_kind, 'token');
});

t.test('repo.create - an org without webhook targets stores no events, the rest as usual', async (t) => {
  const outboxBefore = outboxEvents(storage.meta).length;
  const res = await create({ ...createInput('Silent'), org_id: quiet.id }, quiet);
  t.equal(res.status, 201);
  const repo = storage.meta.get(K.repo(res.json.id)) as RepoRecord;
  t.equal(repo.last_op_id, ops(repo.id)[0]?.id, 'the operation is recorded');
  t.equal(outboxEvents(storage.meta).length, outboxBefore, 'nobody subscribes: no event kept');
});

t.test('repo.create - a refused create writes nothing', async (t) => {
  const outboxBefore = outboxEvents(storage.meta).length;
  const reposBefore = storage.meta.getKeysCount(Ranges.orgRepos(org.id));
  const dup = await create(createInput('ONE'));
  t.equal(dup.status, 409);
  t.equal(dup.code, 'REPO_EXISTS');
  t.equal(outboxEvents(storage.meta).length, outboxBefore, 'no event');
  t.equal(storage.meta.getKeysCount(Ranges.orgRepos(org.id)), reposBefore, 'no repository');
  t.equal(storage.meta.getKeysCount(Ranges.orgSagas(org.id)), 0, 'no saga begun');
});

t.test('repo.update and repo.delete - operation chain and events with before/after', async (t) => {
  const made = await create(createInput('two', { tags: { a: '1' } }));
  const id = made.json.id as string;
  const upd: UpdateRepoInput = { repo_id: id, name: 'Two2', tags: { a: null, b: '2' } };
  const res = await update('two', upd);
  t.equal(res.status, 200);
  const repo = storage.meta.get(K.repo(id)) as RepoRecord;
  t.equal(storage.meta.get(K.repoName(org.id, 'two')), undefined, 'the old name is released');
  consistent(t, repo);
  const chain = ops(id);
  t.same(chain.map((o) => o.kind), ['repo.create', 'repo.update']);
  t.equal(chain[1]!.parent, chain[0]!.id, 'operations chain through parent');
  const updated = events(id).find((e) => e.type === 'repo.updated')!;
  t.same(updated.data.before, { name: 'two', default_bookmark: 'main', tags: { a: '1' } });
  t.same(updated.data.after, { name: 'Two2', default_bookmark: 'main', tags: { b: '2' } });

  const refused = await update('Two2', { repo_id: id, name: 'Three', default_bookmark: 'nope' });
  t.equal(refused.code, 'INVALID_REQUEST', 'a refused rename');
  t.equal(storage.meta.get(K.repoName(org.id, 'three')), undefined, 'gives its claimed name back');
  t.equal(ops(id).length, 2, 'and writes no operation');

  const createdAt = (storage.meta.get(K.repo(id)) as RepoRecord).created_at;
  const del = await remove(id, 'Two2');
  t.equal(del.status, 200);
  t.same(del.json, { success: true });
  t.equal(storage.meta.get(K.repo(id)), undefined);
  t.equal(storage.meta.get(K.repoName(org.id, 'two2')), undefined);
  t.equal(storage.meta.get(K.orgRepo(org.id, id)), undefined);
  t.equal(storage.meta.get(K.orgRepoByName(org.id, 'two2', id)), undefined, 'out of the order by name');
  t.equal(storage.meta.get(K.orgRepoByCreated(org.id, createdAt, id)), undefined, 'and by creation time');
  t.equal(storage.meta.get(K.bookmark(id, 'main')), undefined);
  const left = ops(id);
  t.same(left.map((o) => o.kind), ['repo.delete']);
  t.equal(left[0]!.parent, chain[1]!.id);
  t.same(events(id).map((e) => e.type), ['repo.created', 'bookmark.created', 'repo.updated', 'repo.deleted']);
  const gone = await update('Two2', { repo_id: id, name: 'x' });
  t.equal(gone.code, 'REPO_NOT_FOUND');
  t.equal(storage.meta.getKeysCount(Ranges.orgSagas(org.id)), 0, 'no saga left');
});

t.test('batching - concurrent creates commit many per LMDB transaction, each answered after its batch', async (t) => {
  batches.length = 0;
  const before = (storage.root.getStats() as { lastTxnId: number }).lastTxnId;
  const results = await Promise.all(Array.from({ length: 300 }, (_, i) => create(createInput(`batch-${i}`))));
  t.ok(results.every((r) => r.status === 201), 'all created');
  const txns = (storage.root.getStats() as { lastTxnId: number }).lastTxnId - before;
  t.equal(batches.reduce((a, b) => a + b, 0), 900, 'each of the three steps of every create was in one batch');
  t.ok(txns <= batches.length, `at most one LMDB write transaction per batch (${txns} for ${batches.length}: queued batches may share one)`);
  t.ok(txns < 300, `${txns} transactions for 300 creates of three steps (largest batch ${Math.max(...batches)})`);
  for (const r of results) consistent(t, storage.meta.get(K.repo(r.json.id)) as RepoRecord);
});

t.test('settling - a create whose init never ran is undone for good; one whose init ran is confirmed', async (t) => {
  const call: StepCall = (actor, command, input) => rt.runtime.call({ actor, command, input, principal: principal(org.id), traceId: 'trace' });
  const json = async (p: Promise<{ body: Uint8Array }>): Promise<any> => JSON.parse(Buffer.from((await p).body).toString('utf8'));
  const sagaOf = (id: string): RepoSagaRecord => storage.meta.get(K.repoSaga(org.id, id)) as RepoSagaRecord;

  const lost = await json(call(`org:${org.id}`, 'repo.reserve', { org_id: org.id, name: 'Lost' }));
  t.equal((await create(createInput('lost'))).code, 'REPO_EXISTS', 'a reserved name is taken');
  const saga = sagaOf(lost.saga_id);
  t.equal(await settleSaga(call, saga), 'undone');
  t.equal(await settleSaga(call, saga), 'undone', 'settling twice changes nothing');
  const late = await outcome((c) => c(`repo:${lost.repo_id}`, 'repo.init', { ...createInput('Lost'), repo_id: lost.repo_id, saga_id: lost.saga_id }), org);
  t.equal(late.code, 'UNAVAILABLE', 'an init arriving after the saga was settled is refused');
  t.equal(storage.meta.get(K.repo(lost.repo_id)), undefined, 'and writes nothing');
  t.equal(storage.meta.get(K.repoName(org.id, 'lost')), undefined, 'the name is free');

  const half = await json(call(`org:${org.id}`, 'repo.reserve', { org_id: org.id, name: 'Half' }));
  await call(`repo:${half.repo_id}`, 'repo.init', { ...createInput('Half'), repo_id: half.repo_id, saga_id: half.saga_id });
  t.equal(storage.meta.get(K.orgRepo(org.id, half.repo_id)), undefined, 'initialised, not yet listed');
  const again = await json(call(`repo:${half.repo_id}`, 'repo.init', { ...createInput('Half'), repo_id: half.repo_id, saga_id: half.saga_id }));
  t.equal(again.id, half.repo_id, 'a repeated init answers the same repository');
  t.equal(ops(half.repo_id).length, 1, 'and writes no second operation');
  t.equal(events(half.repo_id).length, 2, 'nor emits its events again');
  t.equal(await settleSaga(call, sagaOf(half.saga_id)), 'finished');
  consistent(t, storage.meta.get(K.repo(half.repo_id)) as RepoRecord);
  t.equal(storage.meta.getKeysCount(Ranges.orgSagas(org.id)), 0, 'no saga left');
});
