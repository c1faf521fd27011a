import t from 'tap';
import { fileURLToPath } from 'node:url';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isServiceError } from '../../src/errors.js';
import { openStorage } from '../../src/storage/database.js';
import { createOrg } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { prepareObject } from '../../src/storage/git-object-store.js';
import { shardAllowance } from '../../src/storage/quota.js';
import { repoShard } from '../../src/storage/shards.js';
import { createRepository, type StepCall } from '../../src/actors/repo-saga.js';
import { orgActor, repoActor } from '../../src/actors/actor-names.js';
import type { ActorCall } from '../../src/actors/runtime.js';
import { principal, startRuntime } from './runtime.js';

/**
 * A refilled write carries the org's grant for its shard (ActorRequest.quota_grant): the shard
 * takes it in the write's batch before the write runs, so a recall sent after the write cannot take
 * it first, and it keeps the grant when the write itself fails.
 */
const QUOTA = 64 * 1024;
const dataDir = mkdtempSync(join(tmpdir(), 'repohost-grant-'));
const storage = openStorage(dataDir);
const org = createOrg(new LmdbOrgDirectory(storage), 'acme');
const rt = startRuntime({
  dataDir,
  workers: 1,
  commandsModule: fileURLToPath(new URL('../../src/actors/commands/index.js', import.meta.url)),
  settings: { dataDir, publicUrl: 'http://localhost:0', brand: 'Svc', allowPrivateWebhooks: false, allowPrivateUpstreams: true, orgQuotaBytes: QUOTA, blobRetentionS: 86400, logLevel: 'silent', orgDirectory: null },
  onSettled: () => storage.root.resetReadTxn(),
});
t.teardown(async () => {
  await storage.close();
  await rt.cleanup();
});

const send = (call: Omit<ActorCall, 'principal' | 'traceId'>) => rt.runtime.call({ ...call, principal: principal(org.id), traceId: 'trace' });
const json = async (reply: Promise<{ body: Uint8Array }>): Promise<any> => JSON.parse(Buffer.from((await reply).body).toString('utf8'));
const status = (reply: Promise<{ status: number }>): Promise<number | string> => reply.then((r) => r.status, (err: unknown) => (isServiceError(err) ? err.code : String(err)));

const call: StepCall = (actor, command, input) => send({ actor, command, input });
const created = await createRepository(call, { org_id: org.id, name: 'r', default_bookmark: 'main', tags: {}, upstream: null });
const repoId = JSON.parse(Buffer.from(created.body).toString('utf8')).id as string;
const shard = repoShard(repoId);

let files = 0;
/** An apply-ops of one new 4 KiB file, as the front end sends it. */
function write(base = 'z'.repeat(32)): Omit<ActorCall, 'principal' | 'traceId'> {
  const blob = prepareObject('blob', Buffer.alloc(4096, files++));
  return { actor: repoActor(repoId), command: 'apply-ops', input: { repo_id: repoId, list_key: 'ops', base_change_id: base, ops: [{ op: 'write', path: `f${files}.bin`, encoded: { index: 0, oid: blob.oid } }] }, blobs: [blob.value] };
}
const grantFor = (need: number): Promise<any> => json(send({ actor: orgActor(org.id), command: 'quota.grant', input: { org_id: org.id, shard, actor: repoActor(repoId), need, returns: [] } }));

t.test('a write refused by its shard, sent again with its grant, stores; a recall sent after it comes after it', async (t) => {
  t.equal(await status(send(write())), 'QUOTA_EXCEEDED', 'the shard holds no allowance yet');
  const { granted } = await grantFor(8 * 1024);
  t.ok(granted >= 8 * 1024, `the ledger granted ${granted} bytes`);
  // Both posted before either is answered: the recall is the later message to the same actor.
  const stored = status(send({ ...write(), quotaGrant: { orgId: org.id, granted } }));
  const recall = json(send({ actor: repoActor(repoId), command: 'quota.return', input: { org_id: org.id, shard, granted } }));
  t.equal(await stored, 201, 'the write used its grant');
  const after = shardAllowance(storage.meta, shard, org.id);
  t.equal(after.granted, granted);
  t.ok(after.used > 4096, `the write's ${after.used} bytes are counted`);
  t.equal((await recall).returned, granted - after.used, 'the recall gave back only what the write left');
});

t.test('a write that fails keeps the grant it carried for its shard', async (t) => {
  const { granted } = await grantFor(16 * 1024);
  t.equal(await status(send({ ...write('k'.repeat(32)), quotaGrant: { orgId: org.id, granted } })), 'CHANGE_NOT_FOUND', 'the write fails on its own merits');
  t.equal(shardAllowance(storage.meta, shard, org.id).granted, granted, 'the shard holds the grant');
});
