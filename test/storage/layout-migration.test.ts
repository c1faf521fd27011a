import { spawn, spawnSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { K, LAYOUT_VERSION, Layout1, lastPart, Ranges } from '../../src/storage/keys.js';
import { apiAnswers, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { runCli, startTestServer, type TestKey } from '../helpers/server.js';

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

t.test('a migration killed in the middle resumes on the next start; the API answers as before', async (t) => {
  const dir = legacyDataDir(t);
  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/slow-migration.js', import.meta.url)), dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  let batches = 0;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for await (const line of lines) {
    if (line === 'done') break;
    if (++batches === 3) {
      child.kill('SIGKILL');
      break;
    }
  }
  await exited;
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
  t.match(res.stderr + res.stdout, /storage layout 3, newer than this build's 2/);
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
