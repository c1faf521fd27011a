import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ABORT } from 'lmdb';
import t from 'tap';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { encodeKey, K, Ranges } from '../../src/storage/keys.js';
import { applyWriteSet } from '../../src/storage/apply-write-set.js';
import { readReplicaPosition, sealCommit } from '../../src/storage/replica-position.js';
import { serverStorage } from '../../src/storage/server-storage.js';
import { recordingStorage, removeRange, WriteRecorder } from '../../src/storage/write-recorder.js';
import { decodeWriteSet, encodeWriteSet } from '../../src/storage/write-set-codec.js';
import type { CommittedWrites, WriteSet } from '../../src/storage/write-set.js';

/**
 * The recording storage: what a transaction writes is handed over once it commits, by shard, global
 * keys apart; a child transaction that rolls back (a failed command of a batch) drops its ops; what
 * is recorded is what LMDB stores, so applying it elsewhere reproduces the bytes.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-write-recorder-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

let n = 0;
function fresh(): { raw: Storage; storage: Storage; committed: CommittedWrites[] } {
  const raw = openStorage(join(work, `d${n++}`));
  const committed: CommittedWrites[] = [];
  t.teardown(() => raw.close());
  return { raw, storage: recordingStorage(raw, new WriteRecorder((w) => void committed.push(w))), committed };
}

const hex = (bytes: Uint8Array | undefined): string => Buffer.from(bytes ?? []).toString('hex');

t.test('a batch keeps the ops of its committed children and drops those of the rolled back ones', async (t) => {
  const { raw, storage, committed } = fresh();
  const repoA = 'A'.repeat(26);
  storage.root.transactionSync(() => {
    storage.meta.putSync(K.bookmark(repoA, 'main'), { name: 'main', change: 'c1' });
    // A failed command: its child transaction throws and rolls back.
    t.throws(() =>
      storage.root.transactionSync(() => {
        storage.meta.putSync(K.bookmark(repoA, 'lost'), { name: 'lost' });
        storage.objects.putSync(K.object(repoA, 'f'.repeat(40)), Buffer.from('lost object'));
        throw new Error('command failed');
      }),
    );
    // An aborted child, and one nested two deep whose inner child fails.
    storage.root.transactionSync(() => {
      storage.meta.putSync(K.bookmark(repoA, 'aborted'), 1);
      return ABORT;
    });
    storage.root.transactionSync(() => {
      storage.meta.removeSync(K.bookmark(repoA, 'old'));
      try {
        storage.root.transactionSync(() => {
          storage.chunks.putSync(K.chunk(repoA, 'u1', 0), Buffer.from('inner'));
          throw new Error('inner failed');
        });
      } catch {
        // the command went on without it
      }
      storage.objects.putSync(K.object(repoA, 'a'.repeat(40)), Buffer.from('kept object'));
    });
    storage.meta.putSync(K.org('org1'), { id: 'org1' });
  });
  t.equal(committed.length, 1, 'one committed transaction');
  const [w] = committed;
  t.same(
    w!.shards.map((s) => s.shard),
    [K.bookmark(repoA, 'main')[0 as never]],
    'one shard: the repository’s',
  );
  const ops = w!.shards[0]!.ops.map((op) => `${op.db} ${op.kind} ${hex(op.key)}`);
  t.same(ops, [
    `meta put ${hex(encodeKey(K.bookmark(repoA, 'main')))}`,
    `meta del ${hex(encodeKey(K.bookmark(repoA, 'old')))}`,
    `objects put ${hex(encodeKey(K.object(repoA, 'a'.repeat(40))))}`,
  ]);
  t.same(
    w!.global.map((op) => hex(op.key)),
    [hex(encodeKey(K.org('org1')))],
    'the global key is listed apart',
  );
  t.equal(raw.meta.get(K.bookmark(repoA, 'lost')), undefined, 'the rolled back write is not stored');
  t.equal(hex(w!.shards[0]!.ops[0]!.value), hex(raw.meta.getBinary(K.bookmark(repoA, 'main'))), 'the recorded value is the stored bytes');
  t.equal(hex(w!.shards[0]!.ops[2]!.value), hex(Buffer.from('kept object')), 'a binary value as written');
});

t.test('a rolled back outermost transaction hands nothing over; a write outside one is its own', async (t) => {
  const { storage, committed } = fresh();
  t.throws(() =>
    storage.root.transactionSync(() => {
      storage.meta.putSync(K.repo('R'.repeat(26)), { id: 'x' });
      throw new Error('batch failed');
    }),
  );
  t.equal(committed.length, 0);
  storage.meta.putSync(K.repo('R'.repeat(26)), { id: 'y' });
  // The caller may reuse its buffer once `put` returns, before the write commits.
  const reused = Buffer.from('chunk');
  const put = storage.chunks.put(K.chunk('R'.repeat(26), 'u', 0), reused);
  reused.fill(0);
  await put;
  t.equal(storage.chunks.getBinary(K.chunk('R'.repeat(26), 'u', 0))?.toString(), 'chunk', 'the bytes given are stored');
  await storage.root.transaction(() => storage.meta.removeSync(K.repo('R'.repeat(26))));
  t.same(
    committed.map((w) => w.shards.flatMap((s) => s.ops.map((op) => `${op.db} ${op.kind}`))),
    [['meta put'], ['chunks put'], ['meta del']],
  );
  t.ok(committed[0]!.order < committed[1]!.order && committed[1]!.order < committed[2]!.order, 'in commit order');
  t.equal(Buffer.from(committed[1]!.shards[0]!.ops[0]!.value!).toString(), 'chunk', 'and recorded');
  t.throws(() => storage.meta.ifNoExists(K.repo('x'), () => undefined), /not recorded/, 'a conditional write cannot bypass the record');
});

t.test('a put that keeps an existing key is recorded only when it wrote', async (t) => {
  const { raw, storage, committed } = fresh();
  const key = K.object('N'.repeat(26), 'c'.repeat(40));
  const results: unknown[] = [];
  storage.root.transactionSync(() => {
    results.push(storage.objects.putSync(key, Buffer.from('first'), { noOverwrite: true }));
    results.push(storage.objects.putSync(key, Buffer.from('second'), { noOverwrite: true }));
  });
  t.same(results, [true, false], 'the second put finds the key');
  t.equal(raw.objects.getBinary(key)?.toString(), 'first', 'and leaves its value');
  t.same(
    committed[0]!.shards[0]!.ops.map((op) => `${op.kind} ${Buffer.from(op.value!).toString()}`),
    ['put first'],
    'only the put that wrote is recorded',
  );
  t.throws(() => storage.objects.putSync(key, Buffer.from('x'), { noOverwrite: true, append: true }), /not recorded/, 'other options are still refused');
  // A child that put the key and rolled back leaves it free for its parent.
  const other = K.object('N'.repeat(26), 'd'.repeat(40));
  storage.root.transactionSync(() => {
    t.throws(() =>
      storage.root.transactionSync(() => {
        storage.objects.putSync(other, Buffer.from('rolled back'), { noOverwrite: true });
        throw new Error('command failed');
      }),
    );
    t.equal(storage.objects.putSync(other, Buffer.from('kept'), { noOverwrite: true }), true, 'the parent writes the key');
  });
  t.same(
    committed[1]!.shards[0]!.ops.map((op) => Buffer.from(op.value!).toString()),
    ['kept'],
    'and only its put is recorded',
  );
});

t.test('the codec is deterministic and lossless; applying reproduces the bytes', async (t) => {
  const { raw, storage, committed } = fresh();
  const repo = 'C'.repeat(26);
  const value = { name: 'main', nested: { list: [1, 'two', null, true], big: 2 ** 40, float: 0.5 }, text: 'ünï' };
  storage.root.transactionSync(() => {
    storage.meta.putSync(K.bookmark(repo, 'main'), value);
    storage.objects.putSync(K.object(repo, 'b'.repeat(40)), Buffer.from([0, 255, 1, 254]));
    storage.chunks.putSync(K.chunk(repo, 'up', 3), Buffer.alloc(0x10000, 7));
    storage.meta.removeSync(K.bookmark(repo, 'gone'));
  });
  const shard = committed[0]!.shards[0]!;
  const set: WriteSet = { ...shard, epoch: 7, batchId: 'node-1:42' };
  const bytes = encodeWriteSet(set);
  t.equal(hex(encodeWriteSet(decodeWriteSet(bytes))), hex(bytes), 'decode then encode gives the same bytes');
  const decoded = decodeWriteSet(bytes);
  t.same({ shard: decoded.shard, epoch: decoded.epoch, batchId: decoded.batchId }, { shard: set.shard, epoch: 7, batchId: 'node-1:42' });
  t.same(
    decoded.ops.map((op) => [op.db, op.kind, hex(op.key), hex(op.value)]),
    set.ops.map((op) => [op.db, op.kind, hex(op.key), hex(op.value)]),
  );
  t.throws(() => decodeWriteSet(Buffer.from([0x22, 0x05, 0x08])), 'truncated bytes are refused');

  const follower = openStorage(join(work, 'follower'));
  t.teardown(() => follower.close());
  follower.meta.putSync(K.bookmark(repo, 'gone'), 'stale');
  follower.root.transactionSync(() => applyWriteSet(follower, decoded));
  t.equal(hex(follower.meta.getBinary(K.bookmark(repo, 'main'))), hex(raw.meta.getBinary(K.bookmark(repo, 'main'))), 'meta bytes');
  t.same(follower.meta.get(K.bookmark(repo, 'main')), value);
  t.equal(follower.meta.get(K.bookmark(repo, 'gone')), undefined, 'the delete applied');
  t.equal(hex(follower.objects.getBinary(K.object(repo, 'b'.repeat(40)))), '00ff01fe');
  t.equal(follower.chunks.getBinary(K.chunk(repo, 'up', 3))?.length, 0x10000);

  // A set with one op of its shard, then one of another shard.
  const late: WriteSet = {
    ...decoded,
    ops: [
      { db: 'meta', kind: 'put', key: encodeKey(K.bookmark(repo, 'late')), value: decoded.ops[0]!.value! },
      { db: 'meta', kind: 'put', key: encodeKey([(decoded.shard + 1) % 256, 'x']), value: decoded.ops[0]!.value! },
    ],
  };
  t.throws(() => applyWriteSet(follower, late), /outside/, 'ops outside the shard are refused');
  t.equal(follower.meta.get(K.bookmark(repo, 'late')), undefined, 'and nothing of the set is applied');
});

t.test('a range removal is one op, and removes the same keys on a follower', async (t) => {
  const { raw, storage, committed } = fresh();
  const repo = 'D'.repeat(26);
  const other = 'E'.repeat(26);
  storage.root.transactionSync(() => {
    for (let i = 0; i < 50; i++) storage.objects.putSync(K.object(repo, i.toString(16).padStart(40, '0')), Buffer.from([i]));
    storage.objects.putSync(K.object(other, 'f'.repeat(40)), Buffer.from('other'));
  });
  const follower = openStorage(join(work, 'range-follower'));
  t.teardown(() => follower.close());
  const apply = (w: CommittedWrites, seq: number): void => {
    for (const set of w.shards) applyWriteSet(follower, decodeWriteSet(encodeWriteSet({ ...set, epoch: 1, batchId: String(seq) })));
  };
  apply(committed[0]!, 1);
  storage.root.transactionSync(() => removeRange(storage, 'objects', Ranges.objects(repo)));
  const ops = committed[1]!.shards.flatMap((s) => s.ops);
  t.same(
    ops.map((op) => op.kind),
    ['delRange'],
    'one op for 50 keys',
  );
  apply(committed[1]!, 2);
  for (const db of [raw, follower]) {
    t.same([...db.objects.getKeys(Ranges.objects(repo))], [], 'the range is empty');
    t.equal(db.objects.getBinary(K.object(other, 'f'.repeat(40)))?.toString(), 'other', 'a key outside it stays');
  }
  storage.root.transactionSync(() => removeRange(storage, 'objects', Ranges.objects(repo)));
  t.equal(committed.length, 3);
  t.same(committed[2]!.shards, [], 'an empty range records nothing');
  // Without a recorder, the same function removes the keys one by one.
  raw.root.transactionSync(() => removeRange(raw, 'objects', Ranges.objects(other)));
  t.same([...raw.objects.getKeys(Ranges.objects(other))], []);
});

t.test('a server thread writes through the storage itself unless the process records', async (t) => {
  const { raw } = fresh();
  const saved = process.env.REPOHOST_WRITE_SET_JOURNAL;
  t.teardown(() => {
    if (saved === undefined) delete process.env.REPOHOST_WRITE_SET_JOURNAL;
    else process.env.REPOHOST_WRITE_SET_JOURNAL = saved;
  });
  delete process.env.REPOHOST_WRITE_SET_JOURNAL;
  t.equal(serverStorage(raw), raw, 'single-node mode: no view, nothing recorded');
  process.env.REPOHOST_WRITE_SET_JOURNAL = work;
  const recorded = serverStorage(raw);
  t.not(recorded, raw);
  t.ok(recorded.recorder, 'recording: a view with its recorder');
});

t.test('a range removal outside a transaction is a transaction of its own', async (t) => {
  const { raw, storage, committed } = fresh();
  const repo = 'F'.repeat(26);
  storage.meta.putSync(K.bookmark(repo, 'a'), 1);
  storage.meta.putSync(K.bookmark(repo, 'b'), 2);
  removeRange(storage, 'meta', Ranges.bookmarks(repo));
  t.same(
    committed.map((w) => w.shards.flatMap((s) => s.ops.map((op) => op.kind))),
    [['put'], ['put'], ['delRange']],
  );
  t.same([...raw.meta.getKeys(Ranges.bookmarks(repo))], []);
});

t.test('every transaction is sealed, an asynchronous write (a staged chunk) as a synchronous one', async (t) => {
  const raw = openStorage(join(work, `d${n++}`));
  t.teardown(() => raw.close());
  const committed: CommittedWrites[] = [];
  // The seal cluster mode uses: each shard's commit count, raised in the transaction.
  let storage: Storage = raw;
  storage = recordingStorage(raw, new WriteRecorder((w) => void committed.push(w), (shards) => shards.map((s) => sealCommit(storage, s))));
  const repo = 'S'.repeat(26);
  const shard = (K.chunk(repo, 'u', 0) as unknown[])[0] as number;
  const staging = [storage.meta.put(K.stagedUpload(repo, 'u'), repo), storage.chunks.put(K.chunk(repo, 'u', 0), Buffer.from('c0'))];
  storage.root.transactionSync(() => storage.meta.putSync(K.bookmark(repo, 'main'), 1));
  staging.push(storage.chunks.put(K.chunk(repo, 'u', 1), Buffer.from('c1')), storage.chunks.remove(K.chunk(repo, 'u', 1)));
  await Promise.all(staging);
  const commits = committed.map((w) => w.shards.find((s) => s.shard === shard)?.commit);
  t.same(
    [...commits].sort((a, b) => a! - b!),
    [1, 2, 3, 4, 5],
    'each write made its commit number, none missing or repeated',
  );
  t.equal(readReplicaPosition(raw, shard).commits, 5, 'and the count stored is the last one');
});
