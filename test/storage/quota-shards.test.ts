import t, { type Test } from 'tap';
import { repoActor } from '../../src/actors/actor-names.js';
import { openStorage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';
import { grant, type GrantLedgerEntry } from '../../src/storage/quota-ledger.js';
import { repoBytesUsed, returnUnspent } from '../../src/storage/quota.js';
import { repoShard } from '../../src/storage/shards.js';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { serverForFile, type TestServer } from '../helpers/server.js';
import { ROOT, noise, orgBytesUsed, waitUntil, type ApiResult } from './storage-helpers.js';

/**
 * The org quota kept as per-shard allowances granted by the org's ledger (docs/design.md "Quota
 * and collection"): the org's stored bytes never exceed the quota, whatever the concurrency, and
 * no byte of the quota is lost to deletions, restarts or a kill between a grant and its use: once
 * the writers are sequential again, the org fills up to within one write of the quota.
 */
const QUOTA = 256 * 1024;
const FILE = 10 * 1024;
/** A small write: 1 KiB of content plus its tree and commit. */
const SMALL = 1024;
const SMALL_WRITE = 2 * 1024;

let s: TestServer;
t.before(async () => {
  s = await serverForFile(t, { env: { REPOHOST_ORG_QUOTA_BYTES: String(QUOTA) } });
});

interface Org {
  slug: string;
  id: string;
  token: string;
  repos: Map<string, string>;
}

async function newOrg(slug: string, repoCount: number): Promise<Org> {
  s.createOrg(slug);
  const key = s.createKey({ org: slug, scopes: ['admin'], name: 'writer' });
  const token = await s.token({ key, issuer: slug });
  const repos = new Map<string, string>();
  for (let i = 0; i < repoCount; i++) {
    const res = await s.api('POST', `/${slug}/repos`, { token, body: { name: `r${i}` } });
    if (res.status !== 201) throw new Error(res.text);
    repos.set(`r${i}`, res.json.id as string);
  }
  return { slug, id: (await s.api('GET', `/${slug}`, { token })).json.id as string, token, repos };
}

let written = 0;
function write(org: Org, repo: string, bytes: number): Promise<ApiResult> {
  return s.api('POST', `/${org.slug}/${repo}/apply-ops`, {
    token: org.token,
    body: { base_change_id: ROOT, ops: [{ op: 'write', path: `w${written++}.bin`, content: noise(bytes).toString('base64'), encoding: 'base64' }] },
  });
}

/** Small writes round the org's repositories until one is refused; anything but 201 and 413 fails the test. */
async function fill(t: Test, org: Org): Promise<void> {
  const repos = [...org.repos.keys()];
  const unexpected: string[] = [];
  for (let i = 0; ; i++) {
    const res = await write(org, repos[i % repos.length]!, SMALL);
    if (res.status === 413) break;
    if (res.status !== 201) unexpected.push(res.text);
  }
  t.same(unexpected, [], 'the fill got only 201s before its 413');
}

interface Accounting {
  /** What the org's repositories count, summed. */
  repoBytes: number;
  /** What the shards count as used by the org. */
  used: number;
  /** What the ledger counts as held by shards (granted, not known to be returned). */
  held: number;
}

/** The org's accounting in LMDB (open only while the server is stopped). */
function accounting(org: Org): Accounting {
  const storage = openStorage(s.dataDir);
  try {
    const { meta } = storage;
    let held = 0;
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      const entry = meta.get(K.quotaGrant(org.id, shard)) as GrantLedgerEntry | undefined;
      if (entry) held += entry.granted - entry.returned;
    }
    let repoBytes = 0;
    for (const id of org.repos.values()) repoBytes += repoBytesUsed(meta, id);
    return { repoBytes, used: orgBytesUsed(meta, org.id), held };
  } finally {
    void storage.close();
  }
}

/** Every bound the design states, checked on what is stored. */
function checkBounds(t: Test, a: Accounting, what: string): void {
  t.equal(a.used, a.repoBytes, `${what}: the shards count exactly what the repositories count`);
  t.ok(a.used <= QUOTA, `${what}: the org stores ${a.used} bytes, never over the quota`);
  t.ok(a.held >= a.used && a.held <= QUOTA, `${what}: the ledger's grants (${a.held}) cover what is used and stay within the quota`);
}

/** Fills the org with small writes, stops the server and checks the bounds and that no allowance was stranded. */
async function fillAndCheck(t: Test, org: Org, what: string): Promise<Accounting> {
  await fill(t, org);
  await s.stop();
  const filled = accounting(org);
  checkBounds(t, filled, what);
  t.ok(filled.used > QUOTA - SMALL_WRITE, `${what}: the org filled to ${filled.used} of ${QUOTA}, no allowance stranded`);
  return filled;
}

t.test('quota shards - concurrent writers across 16 repositories never take the org over its quota, and sequential writes then fill it to within one write', async (t) => {
  const org = await newOrg('many', 16);
  const names = [...org.repos.keys()];
  const results = await Promise.all(Array.from({ length: 48 }, (_, i) => write(org, names[i % names.length]!, FILE)));
  const statuses = results.map((r) => r.status);
  t.ok(statuses.every((c) => c === 201 || c === 413), `only successes and quota refusals: ${statuses.join(',')}`);
  const ok = statuses.filter((c) => c === 201).length;
  t.ok(ok <= Math.floor(QUOTA / FILE), `${ok} writes of 10 KiB were taken`);
  const refused = results.find((r) => r.status === 413);
  t.equal(refused?.json.error.code, 'QUOTA_EXCEEDED');
  t.equal(refused?.json.error.details.quota_bytes, QUOTA);

  const full = await fillAndCheck(t, org, 'after the burst and the fill');
  await s.restart();

  // The accounting survives a restart: still full, and the same bytes counted. (The refused
  // write's refill may recall allowance a shard had left unused: the ledger's holdings may shrink.)
  t.equal((await write(org, 'r0', SMALL)).status, 413, 'still full after the restart');
  await s.stop();
  const restarted = accounting(org);
  t.same({ used: restarted.used, repoBytes: restarted.repoBytes }, { used: full.used, repoBytes: full.repoBytes }, 'a restart changes nothing counted');
  checkBounds(t, restarted, 'after the restart');
  await s.restart();

  // Deleting 15 of the 16 repositories gives their bytes back to the one left, on its own shard.
  for (const name of names.slice(1)) t.equal((await s.api('DELETE', `/${org.slug}/${name}`, { token: org.token })).status, 200);
  const kept = org.repos.get('r0')!;
  for (const name of names.slice(1)) org.repos.delete(name);
  await fill(t, org);
  await s.stop();
  const after = accounting(org);
  checkBounds(t, after, 'after the deletions and the fill');
  t.ok(after.used > QUOTA - SMALL_WRITE, `the repository left took the freed bytes: ${after.used} of ${QUOTA}`);
  t.equal(after.repoBytes, after.used, `the org's bytes are all ${kept}'s`);
  await s.restart();
});

t.test('quota shards - a crash between a grant and its receipt, or between a return and its credit, loses no quota', async (t) => {
  const org = await newOrg('lost', 4);
  const names = [...org.repos.keys()];
  t.equal((await write(org, names[0]!, FILE)).status, 201);
  t.equal((await write(org, names[1]!, FILE)).status, 201);
  await s.stop();

  // What the org's and a shard's transactions leave when the process dies between the two steps
  // of a refill (quota-refill.ts): the ledger granted a shard a chunk it never received; another
  // shard gave back its unused allowance and the ledger never heard of it.
  const storage = openStorage(s.dataDir);
  const shardA = repoShard(org.repos.get(names[2]!)!);
  const shardB = repoShard(org.repos.get(names[1]!)!);
  storage.root.transactionSync(() => {
    const answer = grant(storage.meta, org.id, QUOTA, shardA, repoActor(org.repos.get(names[2]!)!), 50 * 1024);
    t.ok('granted' in answer, 'the ledger granted a chunk');
    const entry = storage.meta.get(K.quotaGrant(org.id, shardB)) as GrantLedgerEntry;
    t.ok(returnUnspent(storage.meta, shardB, org.id, entry.granted) >= 0);
  });
  await storage.close();
  const crashed = accounting(org);
  checkBounds(t, crashed, 'in the state the crash left');
  await s.restart();

  await fill(t, org);
  await s.stop();
  const filled = accounting(org);
  checkBounds(t, filled, 'after the fill');
  t.ok(filled.used > QUOTA - SMALL_WRITE, `the org filled to ${filled.used} of ${QUOTA}: the lost messages cost nothing`);
  await s.restart();
});

t.test('quota shards - kill -9 while writers refill their shards: every bound holds after the restart, and the org still fills', async (t) => {
  const org = await newOrg('killed', 8);
  const names = [...org.repos.keys()];
  let acked = 0;
  // Killed from the fourth acknowledgement's callback: a poll on a loaded machine saw the whole
  // quota acknowledged before its kill landed.
  const killed: { done: Promise<void> | null } = { done: null };
  const writes = Array.from({ length: 40 }, (_, i) =>
    write(org, names[i % names.length]!, FILE).then(
      (res) => {
        if (res.status === 201 && ++acked === 4) killed.done = s.kill();
      },
      () => undefined,
    ),
  );
  await waitUntil('some writes to be acknowledged', () => Promise.resolve(killed.done !== null), 30_000);
  await killed.done;
  await Promise.all(writes);
  t.ok(acked < 25, `killed with ${acked} writes acknowledged, while others were under way`);
  const crashed = accounting(org);
  checkBounds(t, crashed, 'after the kill');
  t.ok(crashed.used >= acked * FILE, `every acknowledged write is counted (${crashed.used} bytes for ${acked} writes)`);
  await s.restart();
  await fillAndCheck(t, org, 'after the restart and the fill');
  await s.restart();
});

t.test('quota shards - a data directory with the org-wide counter migrates once at start-up and keeps what it counted', async (t) => {
  const org = await newOrg('legacy', 4);
  for (const name of org.repos.keys()) t.equal((await write(org, name, FILE)).status, 201);
  await s.stop();
  const before = accounting(org);

  // The layout the single-counter code wrote: ['quota', orgId] and the repositories' counters only.
  const storage = openStorage(s.dataDir);
  storage.root.transactionSync(() => {
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      storage.meta.removeSync(K.quotaAllowance(shard, org.id));
      storage.meta.removeSync(K.quotaGrant(org.id, shard));
    }
    storage.meta.putSync(K.legacyOrgBytes(org.id), before.repoBytes);
  });
  await storage.close();
  await s.restart();
  await s.stop();
  const migrated = accounting(org);
  t.same(migrated, { repoBytes: before.repoBytes, used: before.repoBytes, held: before.repoBytes }, 'each shard is granted and uses what its repositories count');
  const check = openStorage(s.dataDir);
  t.equal(check.meta.get(K.legacyOrgBytes(org.id)), undefined, 'the org-wide counter is gone');
  await check.close();

  await s.restart();
  await fillAndCheck(t, org, 'after the migration and the fill');
  await s.restart();
});
