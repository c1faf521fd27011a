import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Key } from 'lmdb';
import t from 'tap';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { applyWriteSet } from '../../src/storage/apply-write-set.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { applyLogEntries, readReplicaPosition } from '../../src/storage/replica-position.js';
import { decodeWriteSet, encodeWriteSet } from '../../src/storage/write-set-codec.js';
import { readJournal } from '../../src/storage/write-set-journal.js';
import { populate, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { cloneUrl, gitClient } from '../git/helpers.js';
import { startGitServer } from '../helpers/git-server.js';
import { cleanupWork, GIT_PASSWORD, GIT_USER, makeUpstream, passwordAuth, pullAndWait } from '../sync/fixtures.js';
import { noise, uploadBlob } from './storage-helpers.js';

/**
 * The decisive check of write-set capture: a real server records every write it commits as
 * per-shard write sets (REPOHOST_WRITE_SET_JOURNAL) while a workload runs through the public API
 * and git; applied in commit order to an empty data directory, they reproduce every shard of
 * `meta`, `objects` and `chunks` byte for byte.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-write-set-replay-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const journal = join(work, 'journal');
mkdirSync(journal);

async function ok(s: TestServer, method: string, path: string, body?: unknown): Promise<any> {
  const res = await s.api(method, path, body === undefined ? {} : { body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.json;
}

/**
 * Writes through everything that stores: commands, batches with failures, blobs in chunks, a git
 * push, a pull from an upstream (the sync worker's pack writer), analytics, deletions, a rename.
 */
async function workload(s: TestServer): Promise<void> {
  await populate(s, 6);
  const org = `/${s.org}`;
  const upstreamServer = await startGitServer({ users: { [GIT_USER]: GIT_PASSWORD } });
  t.teardown(() => upstreamServer.close());
  const upstream = await makeUpstream(upstreamServer, 'up');
  t.teardown(() => cleanupWork(upstream));
  await ok(s, 'POST', `${org}/repos`, { name: 'mirror', upstream: { url: upstream.url, auth: passwordAuth } });
  const pulled = await pullAndWait(s, 'mirror');
  if (pulled.status !== 'completed') throw new Error(`pull: ${JSON.stringify(pulled)}`);
  // A large blob, staged in 1 MiB chunks, then linked by a change; another left pending.
  const big = await uploadBlob(s, 'r1', noise(3 * 1024 * 1024 + 5));
  if (big.status !== 201) throw new Error(`upload: ${big.status} ${big.text}`);
  await uploadBlob(s, 'r1', noise(1024 * 1024 + 1));
  const main = (await ok(s, 'GET', `${org}/r1/bookmarks/main`)).change_id as string;
  await ok(s, 'POST', `${org}/r1/apply-ops`, { change_id: main, ops: [{ op: 'write', path: 'big.bin', blob_oid: big.json.oid }, { op: 'rename', from: 'a.txt', to: 'renamed.txt' }] });
  // Concurrent commands on one repository, several of them refused: batches in which a failed
  // command's child transaction rolls back while the others commit.
  const r2main = (await ok(s, 'GET', `${org}/r2/bookmarks/main`)).change_id as string;
  const created = await Promise.all(Array.from({ length: 12 }, (_, i) => s.api('POST', `${org}/r2/bookmarks`, { body: { name: `b${i % 4}`, change_id: r2main } })));
  if (created.filter((r) => r.status === 201).length !== 4) throw new Error(`bookmark race: ${created.map((r) => r.status).join(' ')}`);
  // An idempotent repeat.
  for (let i = 0; i < 2; i++) {
    const res = await s.api('POST', `${org}/r2/bookmarks`, { body: { name: 'idem', change_id: r2main }, headers: { 'idempotency-key': 'replay-1' } });
    if (res.status !== 201) throw new Error(`idempotent create: ${res.status} ${res.text}`);
  }
  // A git push: a new commit on main and a new branch.
  const git = gitClient(t);
  const token = await s.token();
  const dir = join(git.dir, 'r5');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'r5', token), dir]);
  writeFileSync(join(dir, 'pushed.txt'), 'pushed over git\n');
  await git.ok(['add', '-A'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'pushed'], { cwd: dir });
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main', 'HEAD:refs/heads/pushed'], { cwd: dir });
  // Deletions and a rename.
  await ok(s, 'DELETE', `${org}/r4/bookmarks/feat`);
  await ok(s, 'DELETE', `${org}/r3`);
  await ok(s, 'PATCH', `${org}/r4`, { name: 'r4-renamed' });
  await ok(s, 'GET', `${org}/r4-renamed`);
  // The analytics actor writes its document after the default bookmark moves.
  for (const deadline = Date.now() + 20_000; (await ok(s, 'GET', `${org}/r1/analytics`)).status !== 'current'; ) {
    if (Date.now() > deadline) throw new Error('the analytics of r1 did not become current');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every entry of a shard's range in `db`, as stored bytes: key tuple JSON → value hex. */
function shardEntries(storage: Storage, name: string, shard: number): Map<string, string> {
  const db = storage.root.openDB<Buffer, Key>({ name, encoding: 'binary' });
  const out = new Map<string, string>();
  for (const { key, value } of db.getRange(Ranges.shard(shard))) out.set(JSON.stringify(key), value.toString('hex'));
  return out;
}

t.test('the write sets of a real workload, applied in order to an empty directory, reproduce every shard', async (t) => {
  const s = await startTestServer({ env: { ...SCENARIO_ENV, REPOHOST_WRITE_SET_JOURNAL: journal } });
  t.teardown(() => s.cleanup());
  await workload(s).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${s.logs.join('\n')}`);
  });
  await s.stop();

  const entries = readJournal(journal);
  const replica = openStorage(join(work, 'replica'));
  t.teardown(() => replica.close());
  const seq = new Map<number, number>();
  let deletes = 0;
  let rangeDeletes = 0;
  // As a follower applies its shards' logs: each set as the next entry of its shard's log.
  for (const { set } of entries) {
    const next = (seq.get(set.shard) ?? 0) + 1;
    seq.set(set.shard, next);
    deletes += set.ops.filter((op) => op.kind === 'del').length;
    rangeDeletes += set.ops.filter((op) => op.kind === 'delRange').length;
    applyLogEntries(replica, set.shard, [{ seq: next, epoch: set.epoch, writeSets: [encodeWriteSet(set)] }], (storage, bytes) => applyWriteSet(storage, decodeWriteSet(bytes)));
  }
  t.ok(entries.length > 50, `${entries.length} write sets recorded`);
  t.ok(deletes > 30, `${deletes} deletes among them`);
  t.ok(rangeDeletes >= 2, `${rangeDeletes} range deletes (the deleted repository's records and objects)`);

  const source = openStorage(s.dataDir);
  t.teardown(() => source.close());
  let compared = 0;
  const counts = { meta: 0, objects: 0, chunks: 0 };
  const differences: string[] = [];
  for (let shard = 0; shard < SHARD_COUNT; shard++) {
    for (const name of ['meta', 'objects', 'chunks'] as const) {
      const want = shardEntries(source, name, shard);
      const got = shardEntries(replica, name, shard);
      if (name === 'meta') got.delete(JSON.stringify(K.appliedPosition(shard)));
      counts[name] += want.size;
      for (const [key, value] of want) if (got.get(key) !== value) differences.push(`${name} ${key}: ${got.has(key) ? 'other bytes' : 'missing'}`);
      for (const key of got.keys()) if (!want.has(key)) differences.push(`${name} ${key}: not in the source`);
      if (want.size) compared++;
    }
    t.equal(readReplicaPosition(replica, shard).seq, seq.get(shard) ?? 0, `shard ${shard}: its applied position`, { diagnostic: false });
  }
  t.same(differences.slice(0, 20), [], 'every shard range is byte-identical');
  t.ok(compared > 10 && counts.objects > 50 && counts.chunks >= 4, `${compared} non-empty shard ranges, ${JSON.stringify(counts)} entries`);
});
