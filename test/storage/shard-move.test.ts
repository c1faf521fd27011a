import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { openStorage } from '../../src/storage/database.js';
import { Ranges } from '../../src/storage/keys.js';
import { exportShard, importShard } from '../../src/storage/shard-stream.js';
import { repoShard } from '../../src/storage/shards.js';
import { apiAnswers, populate, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { runCli, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Moving a data directory shard by shard (`repohost shard export` / `shard import`): every shard
 * and the global data of a busy directory, imported into a fresh one, serve the same answers; a
 * shard that already has data, a truncated file and a corrupted file are refused without writing.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-shard-move-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

/** A large file (stored in chunks) of `repo`, read raw: its hash, size and the bytes' SHA-256. */
async function bigFile(s: TestServer, repo: string): Promise<string> {
  const res = await fetch(`${s.url}/v1/${s.org}/${repo}/content?path=big.bin`, { headers: { authorization: `Bearer ${await s.token()}`, accept: 'application/octet-stream' } });
  const bytes = Buffer.from(await res.arrayBuffer());
  return `${res.status} ${res.headers.get('x-svc-blob-hash')} ${bytes.length} ${createHash('sha256').update(bytes).digest('hex')}`;
}

let source: TestServer;
let before: Record<string, unknown>;
let bigBefore: string;
let r1: string;
t.before(async () => {
  source = await startTestServer({ env: SCENARIO_ENV });
  await populate(source, 12);
  // A 3 MiB blob: staged in chunks, so the chunks database has data to move too.
  const upload = await source.api('POST', `/${source.org}/r1/blobs`, { raw: randomBytes(3 * 1024 * 1024), headers: { 'content-type': 'application/octet-stream' } });
  if (upload.status !== 201) throw new Error(`upload: ${upload.status} ${upload.text}`);
  const main = (await source.api('GET', `/${source.org}/r1/bookmarks/main`)).json.change_id as string;
  const wrote = await source.api('POST', `/${source.org}/r1/apply-ops`, { body: { change_id: main, ops: [{ op: 'write', path: 'big.bin', blob_oid: upload.json.oid }] } });
  if (wrote.status !== 200) throw new Error(`apply-ops: ${wrote.status} ${wrote.text}`);
  before = await apiAnswers(source);
  bigBefore = await bigFile(source, 'r1');
  r1 = (await source.api('GET', `/${source.org}/r1`)).json.id as string;
  await source.stop();
});
t.teardown(() => source.cleanup());

const files = join(work, 'shards');
mkdirSync(files);
const fileOf = (shard: number | 'global'): string => join(files, `${shard}.shard`);

t.test('every shard and the global data, exported and imported into a fresh directory, answer identically', async (t) => {
  t.match(bigBefore, /^200 [0-9a-f]{40} 3145728 /, 'the large file was stored');
  // The global data and r1's shard through the CLI, as an operator runs it; the other shards in
  // process (the same functions, without 255 process starts).
  for (const shard of ['global', String(repoShard(r1))]) {
    const res = await runCli(['shard', 'export', shard, fileOf(shard === 'global' ? 'global' : Number(shard)), '--data', source.dataDir, '--json']);
    t.equal(res.code, 0, res.stderr);
    t.ok(JSON.parse(res.stdout).records > 0, `shard ${shard} has records`);
  }
  const storage = openStorage(source.dataDir);
  let withData = 1;
  try {
    for (let shard = 0; shard < SHARD_COUNT; shard++) if (shard !== repoShard(r1) && exportShard(storage, shard, fileOf(shard)).records > 0) withData++;
  } finally {
    await storage.close();
  }
  t.ok(withData >= 10, `${withData} shards have data`);

  const target = mkdtempSync(join(tmpdir(), 'repohost-shard-target-'));
  t.teardown(() => rmSync(target, { recursive: true, force: true }));
  // The operator copies the sealing key with the global data (it never travels in a shard file).
  copyFileSync(join(source.dataDir, 'secret.key'), join(target, 'secret.key'));
  for (const shard of ['global', String(repoShard(r1))]) {
    const res = await runCli(['shard', 'import', fileOf(shard === 'global' ? 'global' : Number(shard)), '--data', target, '--json']);
    t.equal(res.code, 0, res.stderr);
  }
  const into = openStorage(target);
  try {
    for (let shard = 0; shard < SHARD_COUNT; shard++) if (shard !== repoShard(r1)) importShard(into, fileOf(shard), { replace: false });
  } finally {
    await into.close();
  }

  const moved = await startTestServer({ dataDir: target, org: source.org, key: source.key, env: SCENARIO_ENV });
  t.teardown(() => moved.stop());
  const after = await apiAnswers(moved);
  t.same(Object.keys(after), Object.keys(before), 'the same requests');
  for (const [request, answer] of Object.entries(before)) t.same(after[request], answer, request);
  t.equal(await bigFile(moved, 'r1'), bigBefore, 'the chunked file reads back identical');
  await moved.stop();
});

t.test('an import refuses a shard that has data unless told to replace it', async (t) => {
  const shard = repoShard(r1);
  const refused = await runCli(['shard', 'import', fileOf(shard), '--data', source.dataDir]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, `shard ${shard} already has data here`);
  // Written after the export, in each database of the shard: the replace clears them.
  const extra = [shard, 'r', 'X'.repeat(26), 'bm', 'after-export'];
  const storage = openStorage(source.dataDir);
  storage.root.transactionSync(() => {
    storage.meta.putSync(extra, { name: 'after-export' });
    storage.objects.putSync(extra, Buffer.from('after'));
    storage.chunks.putSync(extra, Buffer.from('after'));
  });
  await storage.close();
  const replaced = await runCli(['shard', 'import', fileOf(shard), '--replace', '--data', source.dataDir, '--json']);
  t.equal(replaced.code, 0, replaced.stderr);
  t.equal(JSON.parse(replaced.stdout).shard, shard);
  const after = openStorage(source.dataDir);
  t.same([after.meta.get(extra), after.objects.get(extra), after.chunks.get(extra)], [undefined, undefined, undefined], 'what the file does not hold is gone');
  await after.close();
});

t.test('a truncated or corrupted shard file is refused and writes nothing', async (t) => {
  const shard = repoShard(r1);
  const whole = readFileSync(fileOf(shard));
  const corrupted = Buffer.from(whole);
  corrupted[Math.floor(whole.length / 2)]! ^= 0xff;
  const damaged: Array<[string, Buffer, RegExp]> = [
    ['truncated', whole.subarray(0, whole.length - 40), /truncated|damaged/],
    ['cut after a record', whole.subarray(0, Math.floor(whole.length * 0.9)), /truncated|damaged/],
    ['corrupted', corrupted, /damaged|truncated/],
    ['not a shard file', Buffer.from('hello'), /not a shard file|truncated/],
  ];
  for (const [what, bytes, message] of damaged) {
    const target = mkdtempSync(join(tmpdir(), 'repohost-shard-damaged-'));
    t.teardown(() => rmSync(target, { recursive: true, force: true }));
    const file = join(target, 'bad.shard');
    writeFileSync(file, bytes);
    const res = await runCli(['shard', 'import', file, '--data', target]);
    t.equal(res.code, 1, `${what}: refused`);
    t.match(res.stderr, message, what);
    const storage = openStorage(target);
    try {
      for (const db of [storage.meta, storage.objects, storage.chunks]) t.equal(db.getKeysCount(Ranges.shard(shard)), 0, `${what}: nothing written`);
    } finally {
      await storage.close();
    }
  }
  t.equal((await runCli(['shard', 'export', '256', join(work, 'x'), '--data', source.dataDir])).code, 1, 'shard numbers stop at 255');
});
