import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isServiceError } from '../../src/errors.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { K, Ranges } from '../../src/storage/keys.js';
import type { BookmarkRecord, EventEnvelope, OperationRecord, RepoRecord } from '../../src/storage/records.js';
import type { CreateRepoInput, UpdateRepoInput } from '../../src/actors/commands/repos.js';
import type { WebhookTargetRecord } from '../../src/storage/webhook-store.js';
import { fixture, principal, startRuntime } from './runtime.js';

/**
 * The repository commands against the real actor runtime and LMDB, with no system actor draining
 * the outbox: every mutation's record, indexes, operation-log entry and outbox events appear
 * together, in one transaction per drained batch, or not at all. The org has a webhook target
 * (events are only stored for orgs that have one); a second org without targets stores none.
 */
const ROOT = 'z'.repeat(32);
const SECRET = 'tok_upstream_secret_55aa';

const dataDir = mkdtempSync(join(tmpdir(), 'repohost-storage-'));
const storage = openStorage(dataDir);
const org = createOrg(storage, 'acme');
const quiet = createOrg(storage, 'quiet');
storage.meta.putSync(K.webhookTarget(org.id, 'wht_test'), {
  id: 'wht_test',
  org_id: org.id,
  name: 'all events',
  url: 'https://93.184.215.14/hook',
  events: ['repo.created'],
  repo_ids: null,
  sealed_secret: 'unused',
  created_at: new Date(0).toISOString(),
  updated_at: new Date(0).toISOString(),
} satisfies WebhookTargetRecord);
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

async function call(command: string, input: unknown, asOrg = org): Promise<{ status: number; json: any; code?: string }> {
  try {
    const r = await rt.runtime.call({ actor: `org:${asOrg.id}`, command, input, principal: { ...principal(asOrg.id), orgSlug: asOrg.slug }, traceId: 'trace' });
    return { status: r.status, json: JSON.parse(Buffer.from(r.body).toString('utf8')) };
  } catch (err) {
    if (isServiceError(err)) return { status: err.status, json: null, code: err.code };
    throw err;
  }
}

const createInput = (name: string | null, extra: Partial<CreateRepoInput> = {}): CreateRepoInput => ({ org_id: org.id, name, default_bookmark: 'main', tags: {}, upstream: null, ...extra });
const events = (repoId: string): EventEnvelope[] => [...storage.meta.getRange(Ranges.outbox())].map(({ value }) => value as EventEnvelope).filter((e) => e.repository?.id === repoId);
const ops = (repoId: string): OperationRecord[] => [...storage.meta.getRange(Ranges.operations(repoId))].map(({ value }) => value as OperationRecord);

/** Record ↔ name index ↔ org list ↔ default bookmark, all present. */
function consistent(t: Test, repo: RepoRecord): void {
  t.equal(storage.meta.get(K.repoName(org.id, repo.name)), repo.id, `${repo.name}: name index`);
  t.equal(storage.meta.get(K.orgRepo(org.id, repo.id)), true, `${repo.name}: org list`);
  const bm = storage.meta.get(K.bookmark(repo.id, repo.default_bookmark)) as BookmarkRecord | undefined;
  t.equal(bm?.change_id, ROOT, `${repo.name}: default bookmark at the virtual root`);
}

t.test('repo.create - record, indexes, default bookmark, operation and both events in one transaction', async (t) => {
  const before = (storage.root.getStats() as { lastTxnId: number }).lastTxnId;
  const res = await call('repo.create', createInput('One', { tags: { team: 'x' }, upstream: { url: 'https://93.184.215.14/r.git', auth: { kind: 'token', token: SECRET } } }));
  t.equal(res.status, 201);
  t.equal((storage.root.getStats() as { lastTxnId: number }).lastTxnId, before + 1, 'exactly one write transaction');
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
  const outboxBefore = storage.meta.getKeysCount(Ranges.outbox());
  const res = await call('repo.create', { ...createInput('Silent'), org_id: quiet.id }, quiet);
  t.equal(res.status, 201);
  const repo = storage.meta.get(K.repo(res.json.id)) as RepoRecord;
  t.equal(repo.last_op_id, ops(repo.id)[0]?.id, 'the operation is recorded');
  t.equal(storage.meta.getKeysCount(Ranges.outbox()), outboxBefore, 'nobody subscribes: no event kept');
});

t.test('repo.create - a refused create writes nothing', async (t) => {
  const outboxBefore = storage.meta.getKeysCount(Ranges.outbox());
  const reposBefore = storage.meta.getKeysCount(Ranges.orgRepos(org.id));
  const dup = await call('repo.create', createInput('ONE'));
  t.equal(dup.status, 409);
  t.equal(dup.code, 'REPO_EXISTS');
  t.equal(storage.meta.getKeysCount(Ranges.outbox()), outboxBefore, 'no event');
  t.equal(storage.meta.getKeysCount(Ranges.orgRepos(org.id)), reposBefore, 'no repository');
});

t.test('repo.update and repo.delete - operation chain and events with before/after', async (t) => {
  const made = await call('repo.create', createInput('two', { tags: { a: '1' } }));
  const id = made.json.id as string;
  const upd: UpdateRepoInput = { repo_id: id, name: 'Two2', tags: { a: null, b: '2' } };
  const res = await call('repo.update', upd);
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

  const del = await call('repo.delete', { repo_id: id });
  t.equal(del.status, 200);
  t.same(del.json, { success: true });
  t.equal(storage.meta.get(K.repo(id)), undefined);
  t.equal(storage.meta.get(K.repoName(org.id, 'two2')), undefined);
  t.equal(storage.meta.get(K.orgRepo(org.id, id)), undefined);
  t.equal(storage.meta.get(K.bookmark(id, 'main')), undefined);
  const left = ops(id);
  t.same(left.map((o) => o.kind), ['repo.delete']);
  t.equal(left[0]!.parent, chain[1]!.id);
  t.same(events(id).map((e) => e.type), ['repo.created', 'bookmark.created', 'repo.updated', 'repo.deleted']);
  const gone = await call('repo.update', { repo_id: id, name: 'x' });
  t.equal(gone.code, 'REPO_NOT_FOUND');
});

t.test('batching - concurrent creates commit many per LMDB transaction, each answered after its batch', async (t) => {
  batches.length = 0;
  const before = (storage.root.getStats() as { lastTxnId: number }).lastTxnId;
  const results = await Promise.all(Array.from({ length: 300 }, (_, i) => call('repo.create', createInput(`batch-${i}`))));
  t.ok(results.every((r) => r.status === 201), 'all created');
  const txns = (storage.root.getStats() as { lastTxnId: number }).lastTxnId - before;
  t.equal(batches.reduce((a, b) => a + b, 0), 300, 'every create was in one batch');
  t.ok(txns <= batches.length, `at most one LMDB write transaction per batch (${txns} for ${batches.length}: queued batches may share one)`);
  t.ok(txns < 300, `${txns} transactions for 300 creates (largest batch ${Math.max(...batches)})`);
  for (const r of results) consistent(t, storage.meta.get(K.repo(r.json.id)) as RepoRecord);
});
