import t from 'tap';
import { randomBytes } from 'node:crypto';
import { repoShard } from '../../src/storage/shards.js';
import { startCluster } from '../helpers/cluster.js';
import { ROOT, retrying } from '../helpers/replica-scenarios.js';

// A write whose write set is larger than one entry of the shard log's engine (etcd refuses a
// request above 1.5 MiB; the JetStream streams a message above 8 MiB) is acknowledged, and its
// shard's new owner serves it after the old one is killed: the record went through the log in
// pieces and the followers put it back together (src/cluster/log/piece-log.ts). Many files of
// 10 KiB: a large file is staged in chunks of its own, but small ones all go in the write's one
// transaction (before, the write was answered 503 and its shard's copy left divergent).
const TTL_S = 5;
const FILE_BYTES = 10 * 1024;

for (const [log, mib] of [
  ['etcd', 3],
  ['jetstream', 10],
] as const) {
  t.test(`a write of ${mib} MiB in small files survives its owner's loss, shard log on ${log}`, async (t) => {
    const cluster = await startCluster(t, { log, leaseTtlS: TTL_S });
    await cluster.settled();
    const [n1] = cluster.nodes;
    const repo = await n1!.api('POST', '/acme/repos', { body: { name: 'large' } });
    t.equal(repo.status, 201, 'repository created');
    const content = randomBytes(mib * 1024 * 1024);
    const files = Math.floor(content.length / FILE_BYTES);
    const file = (i: number): Buffer => content.subarray(i * FILE_BYTES, (i + 1) * FILE_BYTES);
    const write = await n1!.api('POST', '/acme/large/apply-ops', {
      body: { base_change_id: ROOT, ops: Array.from({ length: files }, (_, i) => ({ op: 'write', path: `f${i}.bin`, content: file(i).toString('base64'), encoding: 'base64' })) },
    });
    t.equal(write.status, 201, `the write is acknowledged (${write.text.slice(0, 200)})`);
    const changeId = write.json.change.id as string;

    const owner = await cluster.ownerOf(repoShard(repo.json.id as string), n1);
    await owner.kill();
    const survivors = cluster.nodes.filter((n) => n !== owner);
    await cluster.settled(60_000, survivors);
    for (const i of [0, 150, files - 1]) {
      const read = await retrying(() => survivors[0]!.api('GET', `/acme/large/content?path=f${i}.bin&change_id=${changeId}`));
      t.equal(read.status, 200, `f${i}.bin read through ${survivors[0]!.id} after ${owner.id} was killed`);
      t.ok(read.json.content === file(i).toString('base64'), 'intact');
    }
  });
}
