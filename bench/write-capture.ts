/**
 * `node dist/bench/write-capture.js [--rounds 9] [--transactions 2000]`: what recording write sets
 * costs a writer. One transaction is shaped like an agent-fleet apply-ops batch: 12 `meta` records
 * of about 300 bytes (change, commit index, evolution, operation, bookmark, outbox…) and 4 git
 * objects of 2 KiB, committed as the mailbox commits (COMMIT_THEN_SYNC).
 *
 * Variants, alternated round by round on one thread and one data directory: `plain` (the storage
 * itself: single-node mode), `recorded` (the recording view with a sink that keeps nothing), and
 * `encoded` (the same, the sink also encoding each shard's write set with the codec, as a log
 * append would). Printed: the median and fastest round of CPU time (user + system) and of wall time
 * per transaction.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { COMMIT_THEN_SYNC } from '../src/storage/commit-flags.js';
import { openStorage, type Storage } from '../src/storage/database.js';
import { K } from '../src/storage/keys.js';
import { recordingStorage, WriteRecorder } from '../src/storage/write-recorder.js';
import { encodeWriteSet } from '../src/storage/write-set-codec.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, transactions: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 9);
const TRANSACTIONS = Number(values.transactions ?? 2000);

const dir = mkdtempSync(join(tmpdir(), 'repohost-write-capture-'));
const plain = openStorage(dir);
const variants: Record<string, Storage> = {
  plain,
  recorded: recordingStorage(plain, new WriteRecorder(() => undefined)),
  encoded: recordingStorage(
    plain,
    new WriteRecorder((w) => {
      for (const set of w.shards) encodeWriteSet({ ...set, epoch: 1, batchId: 'bench' });
    }),
  ),
};

const text = 'x'.repeat(220);
const object = Buffer.alloc(2048, 1);
let n = 0;
function transaction(storage: Storage): void {
  const repo = `repo_${String(n % 50).padStart(22, '0')}`;
  storage.root.transactionSync(() => {
    for (let i = 0; i < 12; i++) storage.meta.putSync(K.operation(repo, `op_${n}_${i}`), { id: `op_${n}_${i}`, repo_id: repo, text, at: n, parents: ['a', 'b'] });
    for (let i = 0; i < 4; i++) storage.objects.putSync(K.object(repo, (n * 4 + i).toString(16).padStart(40, '0')), object);
  }, COMMIT_THEN_SYNC);
  n++;
}

const results: Record<string, { cpu: number[]; wall: number[] }> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, storage] of Object.entries(variants)) {
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    for (let i = 0; i < TRANSACTIONS; i++) transaction(storage);
    const cpu = process.cpuUsage(cpu0);
    const wall = performance.now() - wall0;
    (results[name] ??= { cpu: [], wall: [] }).cpu.push((cpu.user + cpu.system) / TRANSACTIONS);
    results[name].wall.push((wall * 1000) / TRANSACTIONS);
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [name, { cpu, wall }] of Object.entries(results)) {
  console.log(`${name.padEnd(9)} cpu µs/txn median ${median(cpu).toFixed(1)} min ${Math.min(...cpu).toFixed(1)}   wall µs/txn median ${median(wall).toFixed(1)} min ${Math.min(...wall).toFixed(1)}`);
}
await plain.close();
rmSync(dir, { recursive: true, force: true });
