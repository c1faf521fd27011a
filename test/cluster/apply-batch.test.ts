import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ApplyBatch } from '../../src/cluster/replica/apply-batch.js';
import { NESTABLE_COMMIT_THEN_SYNC } from '../../src/storage/commit-flags.js';
import { openStorage } from '../../src/storage/database.js';
import { K } from '../../src/storage/keys.js';
import { markAcknowledged, readReplicaPosition } from '../../src/storage/replica-position.js';

/**
 * The followers' applies and the owners' positions of one turn commit in one transaction
 * (src/cluster/replica/apply-batch.ts): in the order queued, each work on its own, so one that
 * throws leaves the others committed; a position written late never moves a newer one back.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-apply-batch-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const storage = openStorage(work);
t.teardown(() => storage.close());

const put = (key: string, value: string) => () => storage.root.transactionSync(() => storage.meta.putSync([0, 'test', key], value), NESTABLE_COMMIT_THEN_SYNC);

t.test('works of one turn commit together; one that throws rolls back alone', async (t) => {
  const batch = new ApplyBatch(storage);
  const outcomes = await Promise.allSettled([
    batch.run(put('a', '1')),
    batch.run(() =>
      storage.root.transactionSync(() => {
        storage.meta.putSync([0, 'test', 'b'], '2');
        throw new Error('broken write set');
      }, NESTABLE_COMMIT_THEN_SYNC),
    ),
    batch.run(put('c', '3')),
    batch.run(put('a', 'later')),
  ]);
  t.same(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
  );
  t.match((outcomes[1] as PromiseRejectedResult).reason, /broken write set/);
  t.equal(storage.meta.get([0, 'test', 'a']), 'later', 'applied in the order queued');
  t.equal(storage.meta.get([0, 'test', 'b']), undefined, 'the failed work left nothing');
  t.equal(storage.meta.get([0, 'test', 'c']), '3');
});

t.test('a position written late does not move a newer one back', async (t) => {
  const batch = new ApplyBatch(storage);
  markAcknowledged(storage, 5, { seq: 10, epoch: 2, commit: 7 });
  await batch.run(() => markAcknowledged(storage, 5, { seq: 8, epoch: 2, commit: 6 }));
  t.same(storage.meta.get(K.appliedPosition(5)), { seq: 10, epoch: 2, commit: 7 });
  await batch.run(() => markAcknowledged(storage, 5, { seq: 12, epoch: 2, commit: 9 }));
  t.equal(readReplicaPosition(storage, 5).seq, 12);
});
