import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { encodeInlineObject } from '../../src/storage/git-object-store.js';
import { K } from '../../src/storage/keys.js';
import { oldestReaderLag } from '../../src/storage/lmdb-readers.js';
import { ObjectReader } from '../../src/storage/read/object-reader.js';

/**
 * A long reader of objects (a clone) must not pin one LMDB snapshot: its reads renew it once it
 * has been used for 50 ms, so the writes made meanwhile can reuse the pages they free.
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
  const reader = new ObjectReader(storage, REPO);
  t.teardown(() => reader.release());
  t.ok(reader.has(OID), 'the object is there');
  write(1);
  t.ok(reader.has(OID), 'read again at once');
  t.ok(oldestReaderLag(storage.root) >= WRITES, 'within 50 ms it reads the snapshot it took');
  await sleep(60);
  t.ok(reader.has(OID), 'read again later');
  write(2);
  t.ok(oldestReaderLag(storage.root) <= WRITES, `later it reads a newer one (lag ${oldestReaderLag(storage.root)}, not ${2 * WRITES})`);
  reader.release();
  t.equal(oldestReaderLag(storage.root), 0, 'released, it holds none');
});
