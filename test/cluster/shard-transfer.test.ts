import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http2';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { SHARD_COUNT } from '../../src/actors/shard-map.js';
import { serveShardSnapshot } from '../../src/cluster/forward/shard-snapshot.js';
import type { PlacementView } from '../../src/cluster/placement.js';
import { ShardSeeder } from '../../src/cluster/replica/shard-seeder.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { importShardCopy, markAcknowledged, readReplicaPosition, sealCommit } from '../../src/storage/replica-position.js';
import { exportShard } from '../../src/storage/shard-stream.js';
import { repoShard } from '../../src/storage/shards.js';
import { populate, SCENARIO_ENV } from '../helpers/api-scenario.js';
import { startTestServer } from '../helpers/server.js';
import { noise, uploadBlob } from '../storage/storage-helpers.js';
import { shardEntries } from '../helpers/shard-entries.js';
import '../helpers/child-env.js';

/**
 * The state transfer of cluster mode (src/cluster/replica/shard-seeder.ts, forward/shard-snapshot.ts):
 * a node's copy of a shard streamed over HTTP/2 to a peer, which imports it in bounded
 * transactions. The source is a data directory written through the public API by a real server;
 * the copies must equal it byte for byte, a copy that is not at a log position is never sent, and
 * a `kill -9` in the middle of an import leaves the shard marked as not whole.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-shard-transfer-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const BIG = 24 * 1024 * 1024 + 5;


function differences(source: Storage, copy: Storage, shard: number): string[] {
  const want = shardEntries(source, shard);
  const got = shardEntries(copy, shard);
  const out: string[] = [];
  for (const [key, value] of want) if (got.get(key) !== value) out.push(`${key}: ${got.has(key) ? 'other bytes' : 'missing'}`);
  for (const key of got.keys()) if (!want.has(key)) out.push(`${key}: not in the source`);
  return out;
}

// The source: a real server's data directory, every shard with data at a log position as a
// follower's copy would be.
const server = await startTestServer({ env: SCENARIO_ENV });
t.teardown(() => server.cleanup());
await populate(server, 6);
const big = await uploadBlob(server, 'r1', noise(BIG));
if (big.status !== 201) throw new Error(`upload: ${big.status} ${big.text}`);
const bigShard = repoShard((await server.api('GET', `/${server.org}/r1`)).json.id as string);
await server.stop();
const source = openStorage(server.dataDir);
t.teardown(() => source.close());
const shards: number[] = [];
for (let shard = 0; shard < SHARD_COUNT; shard++) {
  if (shardEntries(source, shard).size === 0) continue;
  shards.push(shard);
  markAcknowledged(source, shard, { seq: 1000 + shard, epoch: 3, commit: readReplicaPosition(source, shard).commits });
}

const listener = createServer((req, res) => serveShardSnapshot(source, req, res));
await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => listener.close(() => resolve())));
const port = (listener.address() as { port: number }).port;
const view: PlacementView = {
  localNodeId: 'b',
  shard: () => ({ owner: 'a', epoch: 3, followers: ['b'] }),
  node: (id) => (id === 'a' ? view.nodes()[0] : undefined),
  nodes: () => [{ id: 'a', url: 'http://127.0.0.1:1', internalUrl: `http://127.0.0.1:${port}` }],
  onChange: () => () => undefined,
};

t.test('every shard copied from a peer equals the source byte for byte', async (t) => {
  const dir = join(work, 'copy');
  const copy = openStorage(dir);
  t.teardown(() => copy.close());
  // What the copy held before is replaced, not merged.
  copy.root.transactionSync(() => {
    for (const shard of shards) copy.meta.putSync([shard, 'stale'], 1);
  });
  const seeder = new ShardSeeder(copy, view, dir, 5000);
  t.teardown(() => seeder.close());
  let bigMs = 0;
  for (const shard of shards) {
    const started = Date.now();
    t.equal(await seeder.seed(shard), 1000 + shard, `shard ${shard}: the copy reflects the source's log position`, { diagnostic: false });
    if (shard === bigShard) bigMs = Date.now() - started;
    t.notOk(readReplicaPosition(copy, shard).dirty, `shard ${shard}: whole once imported`, { diagnostic: false });
  }
  const diff = shards.flatMap((shard) => differences(source, copy, shard).map((d) => `shard ${shard} ${d}`));
  t.same(diff.slice(0, 20), [], `${shards.length} shards byte-identical to the source`);
  const chunks = [...copy.chunks.getKeys(Ranges.shard(bigShard))].length;
  t.ok(chunks >= 24, `the large blob's ${chunks} chunks came along`);
  t.comment(`shard ${bigShard} (${(BIG / 1048576).toFixed(0)} MiB of chunks): received and imported in ${bigMs} ms, ${(BIG / 1048576 / (bigMs / 1000)).toFixed(0)} MiB/s`);
});

t.test('a copy that is not at a log position is not sent', async (t) => {
  const dir = join(work, 'refused');
  const copy = openStorage(dir);
  t.teardown(() => copy.close());
  const seeder = new ShardSeeder(copy, view, dir, 5000);
  t.teardown(() => seeder.close());
  const [importing, ahead] = shards.filter((s) => s !== bigShard) as [number, number];
  source.root.transactionSync(() => source.meta.putSync(K.shardImporting(importing), true));
  t.teardown(() => source.root.transactionSync(() => source.meta.removeSync(K.shardImporting(importing))));
  await t.rejects(seeder.seed(importing), /answered 503/, 'a copy being imported');
  // A commit the log has not acknowledged (an owner's, while its append is in flight).
  source.root.transactionSync(() => sealCommit(source, ahead));
  await t.rejects(seeder.seed(ahead), /answered 503/, 'a copy holding a commit past its log position');
  t.equal(shardEntries(copy, ahead).size, 0, 'and nothing was written here');
});

t.test('a kill -9 in the middle of an import leaves the shard marked, then a new import makes it whole', async (t) => {
  const file = join(work, 'big.shard');
  exportShard(source, bigShard, file);
  const dir = join(work, 'killed');
  await openStorage(dir).close();
  const child = spawn(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), '../helpers/shard-import-child.js'), dir, String(bigShard), file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const said = await new Promise<string>((resolve) => {
    child.stdout.setEncoding('utf8');
    child.stdout.once('data', (d: string) => resolve(d.trim()));
    child.once('exit', () => resolve('exit'));
  });
  t.equal(said, 'half', 'the importer stopped between two transactions');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));

  const copy = openStorage(dir);
  t.teardown(() => copy.close());
  const chunks = [...copy.chunks.getKeys(Ranges.shard(bigShard))].length;
  const want = [...source.chunks.getKeys(Ranges.shard(bigShard))].length;
  t.ok(chunks > 0 && chunks < want, `half imported (${chunks} of ${want} chunks)`);
  t.ok(readReplicaPosition(copy, bigShard).dirty, 'and marked: the node rebuilds it rather than serve or follow it');
  const position = await importShardCopy(copy, bigShard, file);
  t.equal(position.seq, 1000 + bigShard, 'imported again, it carries the log position');
  t.notOk(readReplicaPosition(copy, bigShard).dirty, 'whole');
  t.same(differences(source, copy, bigShard), [], 'byte-identical to the source');
});
