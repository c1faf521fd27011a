import t from 'tap';
import { randomBytes } from 'node:crypto';
import { statSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { BLOB, entry, pack, refDelta, varint } from '../helpers/pack-builder.js';
import { openStorage } from '../../src/storage/database.js';
import { Ranges } from '../../src/storage/keys.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { createRepo, pkt, postReceivePack } from './helpers.js';

/**
 * What a pack stores is not its size: a few KiB of deltas can expand to gigabytes. A push whose
 * objects would take the disk under REPOHOST_MIN_FREE_BYTES is stopped while it is stored (503,
 * the server's condition), and what it stored is taken back. Here the reserve is set 256 MiB
 * under the disk's free space and the pack, 1 MiB (its base blob), expands to 2.5 GiB.
 */
const MiB = 1024 * 1024;
const free = (dir: string): number => {
  const fs = statfsSync(dir);
  return fs.bavail * fs.bsize;
};

const probe = await serverForFile(t);
const reserve = free(probe.dataDir) - 256 * MiB;
await probe.stop();
const s = await serverForFile(t, { env: { REPOHOST_MIN_FREE_BYTES: String(reserve) } });

/** `count` blobs of 64 MiB, each 64 copies of a 1 MiB base after a 4-byte stamp, as deltas on that base. */
function bomb(count: number): Buffer {
  const base = randomBytes(MiB);
  const baseOid = hashObject('blob', base);
  const copies = Buffer.from(Array.from({ length: 64 }, () => [0x80 | 0x40, 0x10]).flat());
  const deltas = Array.from({ length: count }, (_, i) => {
    const stamp = Buffer.alloc(4);
    stamp.writeUInt32BE(i);
    return refDelta(baseOid, Buffer.concat([varint(MiB), varint(64 * MiB + 4), Buffer.from([4]), stamp, copies]));
  });
  return pack([entry(BLOB, base), ...deltas]);
}

t.test('git push - a pack expanding past the disk\'s reserve is stopped while stored, and taken back', async (t) => {
  await createRepo(s, 'bomb');
  const id = (await s.api('GET', `/${s.org}/bomb`)).json.id as string;
  const packBytes = bomb(40);
  const head = `${pkt(`${'0'.repeat(40)} ${'1'.repeat(40)} refs/heads/bomb\0report-status`)}0000`;
  const res = await postReceivePack(s, 'bomb', await s.token({ scopes: ['write'] }), Buffer.concat([Buffer.from(head), packBytes]));
  t.comment(`a pack of ${packBytes.length} bytes expanding to 2.5 GiB`);
  t.equal(res.status, 503, res.body.toString().slice(0, 300));
  t.match(res.body.toString(), /nearly full/);
  const storage = openStorage(s.dataDir);
  try {
    t.equal(storage.objects.getKeysCount(Ranges.objects(id)), 0, 'no object of the pack stays');
    t.equal(storage.meta.getKeysCount(Ranges.pending(id)), 0, 'nor a pending mark');
  } finally {
    void storage.close();
  }
  // Other test files beside this one move the disk's free space; the data file shows what was written.
  const written = statSync(join(s.dataDir, 'db', 'data.mdb')).size;
  t.ok(written < 1536 * MiB, `storing stopped early: the data file is ${(written / MiB).toFixed(0)} MiB, not the pack's 2.5 GiB`);
  t.equal((await s.api('GET', `/${s.org}/bomb/bookmarks`)).status, 200, 'still serving');
});
