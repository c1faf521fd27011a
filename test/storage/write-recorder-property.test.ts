import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Key } from 'lmdb';
import { ABORT } from 'lmdb';
import t from 'tap';
import { applyWriteSet } from '../../src/storage/apply-write-set.js';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { recordingStorage, removeRange, WriteRecorder } from '../../src/storage/write-recorder.js';
import type { CommittedWrites } from '../../src/storage/write-set.js';

/**
 * Random nests of transactions (children that commit, throw or abort, at any depth; puts,
 * removes and range removals of records and objects over a few repositories on different
 * shards): the write sets of what committed, applied in order to another directory, always give
 * the same bytes in every shard range.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-write-recorder-property-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

type Step =
  | { op: 'put'; repo: number; name: number; value: number }
  | { op: 'del'; repo: number; name: number }
  | { op: 'object'; repo: number; name: number; size: number }
  | { op: 'clear'; repo: number }
  | { op: 'child'; end: 'commit' | 'throw' | 'abort'; steps: Step[] };

const REPOS = ['A', 'B', 'C'].map((c) => c.repeat(26));
const step: fc.Arbitrary<Step> = fc.letrec<{ step: Step }>((tie) => ({
  step: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.record({ op: fc.constant('put' as const), repo: fc.nat(2), name: fc.nat(5), value: fc.integer() }),
    fc.record({ op: fc.constant('del' as const), repo: fc.nat(2), name: fc.nat(5) }),
    fc.record({ op: fc.constant('object' as const), repo: fc.nat(2), name: fc.nat(5), size: fc.nat(3000) }),
    fc.record({ op: fc.constant('clear' as const), repo: fc.nat(2) }),
    fc.record({ op: fc.constant('child' as const), end: fc.constantFrom('commit' as const, 'throw' as const, 'abort' as const), steps: fc.array(tie('step'), { maxLength: 5 }) }),
  ),
})).step;

class Refused extends Error {}

function run(storage: Storage, steps: Step[]): void {
  for (const s of steps) {
    const repo = REPOS[s.op === 'child' ? 0 : s.repo]!;
    if (s.op === 'put') storage.meta.putSync(K.bookmark(repo, `b${s.name}`), { name: s.name, value: s.value, list: [s.value, 'x'] });
    else if (s.op === 'del') storage.meta.removeSync(K.bookmark(repo, `b${s.name}`));
    else if (s.op === 'object') storage.objects.putSync(K.object(repo, String(s.name).padStart(40, '0')), Buffer.alloc(s.size, s.name));
    else if (s.op === 'clear') {
      removeRange(storage, 'meta', Ranges.repoOwned(repo));
      removeRange(storage, 'objects', Ranges.objects(repo));
    } else {
      try {
        storage.root.transactionSync(() => {
          run(storage, s.steps);
          if (s.end === 'throw') throw new Refused();
          return s.end === 'abort' ? ABORT : undefined;
        });
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
      }
    }
  }
}

/** Every run starts from empty directories, so that a counterexample stands alone. */
function empty(storage: Storage): void {
  storage.root.transactionSync(() => {
    for (const db of [storage.meta, storage.objects]) for (const key of [...db.getKeys(Ranges.allShards())]) db.removeSync(key);
  });
}

function shardBytes(storage: Storage, shard: number): string[] {
  const out: string[] = [];
  for (const name of ['meta', 'objects']) {
    const db = storage.root.openDB<Buffer, Key>({ name, encoding: 'binary' });
    for (const { key, value } of db.getRange(Ranges.shard(shard))) out.push(`${name} ${JSON.stringify(key)} ${value.toString('hex')}`);
  }
  return out;
}

t.test('the committed write sets of random nested transactions reproduce the bytes', async (t) => {
  const raw = openStorage(join(work, 'source'));
  const follower = openStorage(join(work, 'follower'));
  t.teardown(() => Promise.all([raw.close(), follower.close()]));
  const committed: CommittedWrites[] = [];
  const storage = recordingStorage(raw, new WriteRecorder((w) => void committed.push(w)));
  const shards = [...new Set(REPOS.map((r) => (K.repo(r) as number[])[0]!))];
  let batches = 0;
  fc.assert(
    fc.property(fc.array(step, { minLength: 1, maxLength: 8 }), fc.boolean(), (steps, fail) => {
      empty(raw);
      empty(follower);
      try {
        storage.root.transactionSync(() => {
          run(storage, steps);
          if (fail) throw new Refused();
        });
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
      }
      for (const w of committed.splice(0)) {
        batches++;
        follower.root.transactionSync(() => {
          for (const set of w.shards) applyWriteSet(follower, { ...set, epoch: 1, batchId: String(batches) });
        });
      }
      for (const shard of shards) if (shardBytes(raw, shard).join('\n') !== shardBytes(follower, shard).join('\n')) return false;
      return true;
    }),
    { numRuns: 150, seed: 27 },
  );
  t.ok(batches > 50, `${batches} committed batches compared`);
});
