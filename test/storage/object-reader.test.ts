import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ServiceError } from '../../src/errors.js';
import { ObjectGraph } from '../../src/git/object-graph.js';
import { openStorage } from '../../src/storage/database.js';
import { encodeInlineObject } from '../../src/storage/git-object-store.js';
import { K } from '../../src/storage/keys.js';
import { oldestReaderLag } from '../../src/storage/lmdb-readers.js';
import { ObjectReader } from '../../src/storage/read/object-reader.js';

/**
 * A long reader of objects (a clone) must not pin one LMDB snapshot: its reads renew it once it
 * has been used for 50 ms, so the writes made meanwhile can reuse the pages they free. A later
 * snapshot may lack an object the refs reached (its repository deleted, its shard's copy
 * replaced): that is a retryable error, not corruption.
 */
const dir = mkdtempSync(join(tmpdir(), 'repohost-object-reader-'));
const storage = openStorage(dir);
t.teardown(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});

const REPO = 'repo_1';
const OID = 'ab'.repeat(20);
storage.objects.putSync(K.object(REPO, OID), encodeInlineObject('blob', Buffer.from('content')));
const WRITES = 30;
const write = (round: number): void => {
  for (let i = 0; i < WRITES; i++) storage.meta.putSync(['test', round, i], i);
};

t.test('an object reader renews its snapshot as it goes on reading', async (t) => {
  let clock = 0;
  const reader = new ObjectReader(storage, REPO, { now: () => clock });
  t.teardown(() => reader.release());
  t.ok(reader.has(OID), 'the object is there');
  write(1);
  t.ok(reader.has(OID), 'read again at once');
  t.ok(oldestReaderLag(storage.root) >= WRITES, 'under 50 ms old, its snapshot is the one it took');
  clock += 50;
  t.ok(reader.has(OID), 'read again 50 ms later');
  write(2);
  t.ok(oldestReaderLag(storage.root) <= WRITES, `later it reads a newer one (lag ${oldestReaderLag(storage.root)}, not ${2 * WRITES})`);
  reader.release();
  t.equal(oldestReaderLag(storage.root), 0, 'released, it holds none');
});

/** Snapshots open now: a reader slot shows its transaction id while one is, `-` once it ended. */
const open = (): number => storage.root.readerList().split('\n').filter((line) => /^\s*\d+\s+\S+\s+\d+\s*$/.test(line)).length;

t.test('a released reader holds no snapshot before its thread returns to the event loop', async (t) => {
  const reader = new ObjectReader(storage, REPO);
  t.ok(reader.has(OID), 'the object is there');
  t.equal(open(), 1, 'reading, it holds a snapshot');
  // No await in between: a pack that steps aside blocks its thread right after releasing.
  reader.release();
  t.equal(open(), 0, 'released, none is open');
});

t.test('releasing a reader also ends a snapshot another read of its thread left open', async (t) => {
  const other = storage.root.useReadTransaction();
  t.ok(storage.objects.get(K.object(REPO, OID)), 'another read');
  other.done();
  t.equal(open(), 1, 'it left its snapshot open until the event loop');
  new ObjectReader(storage, REPO).release();
  t.equal(open(), 0, 'a reader that read nothing ends it when released');
});

t.test('an object the walk reached that is gone is retryable; one of the wrong type is corruption', async (t) => {
  const graph = new ObjectGraph(new ObjectReader(storage, REPO));
  t.teardown(() => graph.objects.release());
  const gone = 'cd'.repeat(20);
  const thrown = (fn: () => unknown): ServiceError | undefined => {
    try {
      fn();
    } catch (err) {
      return err as ServiceError;
    }
    return undefined;
  };
  for (const [what, err] of [
    ['commit', thrown(() => graph.reachedCommit(gone))],
    ['tree', thrown(() => graph.treeBytes(gone))],
  ] as const) {
    t.equal(err?.code, 'UNAVAILABLE', `a ${what} no longer stored: UNAVAILABLE`);
    t.equal(err?.retryable, true, 'and retryable');
  }
  t.equal(thrown(() => graph.reachedCommit(OID))?.code, 'INTERNAL_ERROR', 'a blob where a commit was reached: corruption');
  t.equal(thrown(() => graph.treeBytes(OID))?.code, 'INTERNAL_ERROR', 'a blob where a tree was reached: corruption');
});
