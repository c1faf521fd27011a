import { spawn, spawnSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { K, keyInRange, LAYOUT_VERSION, Layout1, Layout2, Layout3, lastPart, Ranges } from '../../src/storage/keys.js';
import { deliveryShard, laneShard, repoShard, type DeliveryOwner } from '../../src/storage/shards.js';
import { apiAnswers, DEAD_UPSTREAM, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { runCli, startTestServer, type TestKey, type TestServer } from '../helpers/server.js';
import '../helpers/child-env.js';

/**
 * A data directory written by the build before shard-prefixed keys (layout 1) is migrated when
 * storage opens, and the API then answers exactly as that build did. The fixture was made by
 * running that build's server (commit d4a8359) with `populate(s, 8)` of api-scenario.ts and
 * recording `apiAnswers` before stopping it: eight repositories with files, metadata, bookmarks, a
 * merge and an evolved change, and a failed sync.
 */
const fixture = (name: string): string => fileURLToPath(new URL(`../../../test/storage/fixtures/${name}`, import.meta.url));
const recorded = JSON.parse(readFileSync(fixture('legacy-data-dir.answers.json'), 'utf8')) as {
  org: string;
  key: { id: string; private_key_pem: string; public_x: string };
  answers: Record<string, unknown>;
};
const key: TestKey = { id: recorded.key.id, privateKey: createPrivateKey(recorded.key.private_key_pem), publicX: recorded.key.public_x };

function legacyDataDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-legacy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const untar = spawnSync('tar', ['-xzf', fixture('legacy-data-dir.tar.gz'), '-C', dir], { encoding: 'utf8' });
  if (untar.status !== 0) throw new Error(`tar: ${untar.stderr}`);
  return dir;
}

/** The recorded layout version, entries of layout 1 left and entries under shard numbers (read after the server stopped). */
function layoutCounts(dataDir: string): { version: unknown; old: number; sharded: number } {
  const storage = openStorage(dataDir);
  try {
    const orgIds = [...storage.meta.getKeys(Ranges.orgs())].map(lastPart);
    const old = Layout1.metaRanges(orgIds).reduce((n, r) => n + storage.meta.getKeysCount(r), 0) + storage.objects.getKeysCount(Layout1.binaryRange()) + storage.chunks.getKeysCount(Layout1.binaryRange());
    const sharded = storage.meta.getKeysCount(Ranges.allShards()) + storage.objects.getKeysCount(Ranges.allShards());
    return { version: storage.meta.get(K.layoutVersion()), old, sharded };
  } finally {
    void storage.close();
  }
}

async function answersOf(t: { teardown(fn: () => Promise<void>): void }, dataDir: string): Promise<Record<string, unknown>> {
  const s = await startTestServer({ dataDir, org: recorded.org, key, env: SCENARIO_ENV });
  t.teardown(async () => {
    await s.stop();
  });
  const answers = await apiAnswers(s);
  await s.stop();
  return answers;
}

function compare(t: Test, got: Record<string, unknown>): void {
  t.same(Object.keys(got), Object.keys(recorded.answers), 'the same requests');
  for (const [request, answer] of Object.entries(recorded.answers)) t.same(got[request], answer, request);
}

t.test('the server migrates a data directory of the old layout and answers as the old build did', async (t) => {
  const dir = legacyDataDir(t);
  compare(t, await answersOf(t, dir));
  const after = layoutCounts(dir);
  t.equal(after.version, LAYOUT_VERSION, 'the layout version is recorded');
  t.equal(after.old, 0, 'nothing of the old layout is left');
  t.ok(after.sharded > 100, `${after.sharded} entries under shard numbers`);
});

t.test('a CLI command on an unmigrated directory migrates it first and reads it', async (t) => {
  const dir = legacyDataDir(t);
  const out = join(dir, 'export.git');
  const res = await runCli(['export', `${recorded.org}/r3`, out, '--data', dir, '--json']);
  t.equal(res.code, 0, res.stderr);
  t.match(JSON.parse(res.stdout), { bookmarks: 2 });
  const log = spawnSync('git', ['--git-dir', out, 'log', '--format=%H %s', 'main'], { encoding: 'utf8' });
  t.equal(log.status, 0, log.stderr);
  const clone = recorded.answers[`clone /${recorded.org}/r3`] as string;
  for (const line of log.stdout.trim().split('\n')) t.ok(clone.includes(line.split(' ')[0]!), `commit ${line} as the old build served it`);
});

/**
 * Migrates `dir` five entries a transaction in a process of its own (pausing `pauseMs` after
 * each), killed after transaction `killAfter`: the transactions it reported (fewer when it
 * finished first) and the entries moved by then.
 */
async function killedMigration(dir: string, killAfter: number, pauseMs = 0): Promise<{ batches: number; moved: number }> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/slow-migration.js', import.meta.url)), dir, String(pauseMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  let batches = 0;
  let moved = 0;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for await (const line of lines) {
    if (line === 'done') break;
    moved = Number(/^moved (\d+)$/.exec(line)?.[1]);
    if (++batches === killAfter) {
      child.kill('SIGKILL');
      break;
    }
  }
  await exited;
  return { batches, moved };
}

t.test('a migration killed in the middle resumes on the next start; the API answers as before', async (t) => {
  const dir = legacyDataDir(t);
  const { batches } = await killedMigration(dir, 3);
  t.equal(batches, 3, 'killed after its third transaction, before it finished');
  compare(t, await answersOf(t, dir));
  t.equal(layoutCounts(dir).old, 0, 'the migration completed');
});

t.test('a data directory of a newer layout is refused, not misread', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-newer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const storage = openStorage(dir);
  storage.meta.putSync(K.layoutVersion(), LAYOUT_VERSION + 1);
  await storage.close();
  const res = await runCli(['serve', '--port', '0', '--data', dir], {}, 20_000);
  t.not(res.code, 0);
  t.match(res.stderr + res.stdout, `storage layout ${LAYOUT_VERSION + 1}, newer than this build's ${LAYOUT_VERSION}`);
});

t.test('entries the fixture lacks move too: a queued sync, a staging upload and its chunk', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-layout1-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const repoId = 'repo_01M8EV46RZ7TABSPW1YB7YA64B';
  // Layout 1's keys, written as the build before shards wrote them.
  const legacy = openStorage(dir);
  legacy.meta.removeSync(K.layoutVersion());
  legacy.meta.putSync(['syncq', 'sync_01'], repoId);
  legacy.meta.putSync(['staged', 'upl_01'], repoId);
  legacy.chunks.putSync([repoId, 'upl_01', 0], Buffer.from('chunk'));
  await legacy.close();

  const storage = openStorage(dir);
  try {
    t.equal(storage.meta.get(K.syncQueue(repoId, 'sync_01')), repoId, 'the queued sync, under its repository');
    t.equal(storage.meta.get(K.stagedUpload(repoId, 'upl_01')), repoId, 'the staging announcement');
    t.same(storage.chunks.get(K.chunk(repoId, 'upl_01', 0)), Buffer.from('chunk'), 'the chunk');
    t.equal(storage.meta.get(['syncq', 'sync_01']), undefined, 'the old keys are gone');
    t.equal(storage.meta.get(K.layoutVersion()), LAYOUT_VERSION);
  } finally {
    await storage.close();
  }
});

/** A data directory of layout 2 whose webhook queues are global, as the build before per-shard queues wrote them. */
async function layout2WebhookDir(t: Test, deliveries: number): Promise<{ dir: string; orgId: string; targetId: string; repos: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-layout2-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const orgId = 'org_01M8EV44EE22VXE4B7E6B1SDC7';
  const targetId = 'wht_01M8EV46RZ7TABSPW1YB7YA64B';
  const repos = Array.from({ length: 16 }, (_, i) => `repo_01M8EV46RZ7TABSPW1YB7Y${String(i).padStart(4, 'A')}`);
  const legacy = openStorage(dir);
  legacy.meta.putSync(K.layoutVersion(), 2);
  legacy.meta.putSync(K.org(orgId), { id: orgId, slug: 'acme', name: 'acme', created_at: '' });
  legacy.root.transactionSync(() => {
    for (let i = 0; i < deliveries; i++) {
      const repoId = i % 5 === 4 ? null : repos[i % repos.length]!;
      const id = `dlv_01M8EV46RZ7TABSPW1YB${String(i).padStart(6, '0')}`;
      // Every third delivery is finished, every seventh a redelivery of the one before.
      const record = { id, org_id: orgId, target_id: targetId, repo_id: repoId, status: i % 3 ? 'pending' : 'succeeded', redelivery_of: i % 7 === 6 ? `dlv_prev${i}` : null };
      legacy.meta.putSync(['o', orgId, 'whd', targetId, id], record);
      if (record.status === 'pending') legacy.meta.putSync(['whq', targetId, repoId ?? '-', id], orgId);
      const event = { id: `evt_01M8EV46RZ7TABSPW1YB${String(i).padStart(6, '0')}`, organization: { id: orgId }, repository: repoId && { id: repoId } };
      legacy.meta.putSync(['outbox', event.id], event);
    }
    // A pending entry whose record is gone (the webhook actor drops those when it reads them).
    legacy.meta.putSync(['whq', targetId, repos[0]!, 'dlv_01M8EV46RZ7TABSPW1YBSTALE0'], orgId);
  });
  await legacy.close();
  return { dir, orgId, targetId, repos };
}

/** Where the webhook queues of `dir` are: entries left at global keys, and each shard-owned entry checked against its shard. */
function webhookPlacement(t: Test, dir: string, orgId: string): { old: number; outbox: number; records: number; pending: number } {
  const storage = openStorage(dir);
  try {
    const old = Layout2.metaRanges([orgId]).reduce((n, r) => n + storage.meta.getKeysCount(r), 0);
    let outbox = 0;
    let records = 0;
    let pending = 0;
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      for (const { value } of storage.meta.getRange(Ranges.outbox(shard))) {
        const event = value as { organization: { id: string }; repository: { id: string } | null };
        if (shard !== laneShard(event.organization.id, event.repository?.id ?? null)) t.fail(`event ${JSON.stringify(event)} on shard ${shard}`);
        outbox++;
      }
      for (const { value } of storage.meta.getRange(Ranges.shardWebhookDeliveries(shard))) {
        if (shard !== deliveryShard(value as DeliveryOwner)) t.fail(`delivery ${JSON.stringify(value)} on shard ${shard}`);
        records++;
      }
      for (const { key } of storage.meta.getRange(Ranges.webhookPending(shard))) {
        const [, , targetId, , deliveryId] = key as [number, string, string, string, string];
        const record = storage.meta.get(K.webhookDelivery(shard, targetId, deliveryId));
        if (!record && !deliveryId.endsWith('STALE0')) t.fail(`pending ${deliveryId} away from its record`);
        pending++;
      }
    }
    return { old, outbox, records, pending };
  } finally {
    void storage.close();
  }
}

t.test('the webhook queues of layout 2 move to the shards of the actors that wrote them', async (t) => {
  const { dir, orgId } = await layout2WebhookDir(t, 40);
  const placed = webhookPlacement(t, dir, orgId);
  const pendingBefore = Array.from({ length: 40 }, (_, i) => i).filter((i) => i % 3).length + 1;
  t.same(placed, { old: 0, outbox: 40, records: 40, pending: pendingBefore }, 'every entry moved, each to its shard (a redelivery to the org\'s)');
  const storage = openStorage(dir);
  t.teardown(() => storage.close());
  t.equal(storage.meta.get(K.layoutVersion()), LAYOUT_VERSION);
});

t.test('a migration of the webhook queues killed in the middle resumes and places everything', async (t) => {
  const { dir, orgId } = await layout2WebhookDir(t, 150);
  // Past the outbox (150 entries, 5 per transaction): in the middle of the pending index.
  const { batches, moved } = await killedMigration(dir, 40);
  t.equal(batches, 40, 'killed after its 40th transaction, before it finished');
  t.ok(moved > 150 && moved < 150 + 150 + 101, `${moved} entries had moved, the rest not yet`);
  const placed = webhookPlacement(t, dir, orgId);
  t.same(placed, { old: 0, outbox: 150, records: 150, pending: 101 }, 'the next open finished the move');
});

/** The org's sync runs as the API lists them: whole, in cursor pages of two, and by repository. */
async function syncRunAnswers(s: TestServer, names: string[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const get = async (path: string): Promise<any> => {
    const res = await s.api('GET', path);
    out[path] = { status: res.status, body: res.json };
    return res.json;
  };
  await get('/acme/sync-runs?limit=100');
  for (let page = await get('/acme/sync-runs?limit=2'); page.has_more; ) page = await get(`/acme/sync-runs?limit=2&cursor=${page.next_cursor}`);
  for (const name of names) await get(`/acme/sync-runs?repo=${name}`);
  return out;
}

/**
 * Where the org's sync-run entries are: left at layout 3's keys, and on the shards (each checked
 * to be its repository's).
 */
function orgSyncPlacement(t: Test, storage: Storage): { old: number; placed: number } {
  const orgIds = [...storage.meta.getKeys(Ranges.orgs())].map(lastPart);
  const old = Layout3.metaRanges(orgIds).reduce((n, r) => n + storage.meta.getKeysCount(r), 0);
  let placed = 0;
  for (const orgId of orgIds) {
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      for (const { key, value } of storage.meta.getRange(Ranges.shardOrgSyncs(shard, orgId))) {
        if (repoShard(value as string) !== shard) t.fail(`${JSON.stringify(key)} of ${String(value)} away from its repository`);
        placed++;
      }
    }
  }
  return { old, placed };
}

t.test('the org sync index of layout 3 moves to the repositories\' shards; a killed move resumes', async (t) => {
  const s = await startTestServer({ env: SCENARIO_ENV });
  t.teardown(async () => {
    await s.stop();
    s.cleanup();
  });
  // Four repositories with four syncs each (against an upstream that refuses them: they fail fast).
  const names = ['one', 'two', 'three', 'four'];
  for (const name of names) t.equal((await s.api('POST', '/acme/repos', { body: { name, upstream: { url: DEAD_UPSTREAM } } })).status, 201);
  for (let round = 0; round < 4; round++) {
    for (const name of names) t.equal((await s.api('POST', `/acme/${name}/upstream/syncs`, { body: { direction: 'pull' } })).status, 201);
  }
  for (const deadline = Date.now() + 30_000; ; ) {
    const runs = (await s.api('GET', '/acme/sync-runs?limit=100')).json.sync_runs as Array<{ status: string }>;
    if (runs.length === 16 && runs.every((r) => r.status === 'failed')) break;
    if (Date.now() > deadline) throw new Error(`the syncs did not fail: ${JSON.stringify(runs)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const before = await syncRunAnswers(s, names);
  t.ok(Object.keys(before).length > 10, `${Object.keys(before).length} answers`);
  await s.stop();

  // The index as the build of layout 3 wrote it: one list on the org's shard.
  const legacy = openStorage(s.dataDir);
  const orgId = lastPart([...legacy.meta.getKeys(Ranges.orgs())][0]!);
  const [oldRange] = Layout3.metaRanges([orgId]);
  legacy.root.transactionSync(() => {
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      for (const { key, value } of [...legacy.meta.getRange(Ranges.shardOrgSyncs(shard, orgId))]) {
        legacy.meta.putSync(keyInRange(oldRange!, lastPart(key)), value);
        legacy.meta.removeSync(key);
      }
    }
    legacy.meta.putSync(K.layoutVersion(), 3);
  });
  t.same(orgSyncPlacement(t, legacy), { old: 16, placed: 0 }, 'a directory of layout 3');
  await legacy.close();

  // Killed while it pauses after its second transaction: ten entries moved, six left.
  const { batches, moved } = await killedMigration(s.dataDir, 2, 2_000);
  t.same({ batches, moved }, { batches: 2, moved: 10 }, 'killed after two transactions of five');
  await s.restart();
  t.same(await syncRunAnswers(s, names), before, 'the API lists the sync runs as before');
  await s.stop();
  const migrated = openStorage(s.dataDir);
  try {
    t.same(orgSyncPlacement(t, migrated), { old: 0, placed: 16 }, 'every entry on its repository\'s shard');
    t.equal(migrated.meta.get(K.layoutVersion()), LAYOUT_VERSION);
  } finally {
    await migrated.close();
  }
});
