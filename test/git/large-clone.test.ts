import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { streamRequest } from '../changes/streaming-client.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, ROOT } from './helpers.js';
import { sampleMemory } from './server-memory.js';

/**
 * A clone of a repository holding a 512 MiB file streams it (API §14): the server's own memory —
 * its anonymous resident memory, heap and buffers of every thread — grows by far less than the
 * file. The file's bytes are LMDB pages mapped from the data file; they count in the process's
 * file-backed resident memory like any page cache and are reported beside it.
 */
const MiB = 1024 * 1024;
const SIZE = 512 * MiB;

const s = await serverForFile(t);
const git = gitClient(t);

t.test('git clone - a 512 MiB file streams out: the server\'s anonymous memory grows by less than 128 MiB', { timeout: 600_000 }, async (t) => {
  await createRepo(s, 'big');
  // 1 MiB blocks of a repeated random pattern stamped with the block number: cheap to make, all different.
  const pattern = randomBytes(16 * 1024);
  const gitHash = createHash('sha1').update(`blob ${SIZE}\0`);
  async function* body(): AsyncGenerator<Buffer> {
    for (let i = 0; i < SIZE / MiB; i++) {
      const block = Buffer.allocUnsafe(MiB);
      for (let pos = 0; pos < MiB; pos += pattern.length) pattern.copy(block, pos);
      block.writeUInt32BE(i, 0);
      gitHash.update(block);
      yield block;
    }
  }
  const token = await s.token();
  const uploaded = await streamRequest(`${s.url}/v1/acme/big/blobs`, 'POST', { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': String(SIZE) }, body());
  t.equal(uploaded.status, 201, uploaded.text.slice(0, 300));
  const oid = gitHash.digest('hex');
  t.equal(uploaded.json.oid, oid);
  const written = await s.api('POST', '/acme/big/apply-ops', { body: { base_change_id: ROOT, message: 'big', ops: [{ op: 'write', path: 'big.bin', blob_oid: oid }], bookmarks: [{ name: 'main' }] } });
  t.equal(written.status, 201, written.text);

  // The read pool and the git code are loaded by a first request, before the baseline.
  const url = cloneUrl(s, 'big', await s.token({ scopes: ['read'] }));
  await git.ok(['ls-remote', url]);
  const memory = sampleMemory(s.process.pid!);
  const started = Date.now();
  const dir = join(git.dir, 'big.git');
  const res = await git.run(['clone', '--bare', '--quiet', url, dir]);
  const growth = await memory.stop();
  t.equal(res.status, 0, res.stderr);
  t.comment(`512 MiB clone in ${((Date.now() - started) / 1000).toFixed(1)} s; server growth: ${growth.describe()}`);
  t.ok(growth.grew.anon < 128 * MiB, `the server's anonymous memory grew by ${(growth.grew.anon / MiB).toFixed(0)} MiB`);
  // A failed transfer was reported above; what follows would only fail again for the same reason.
  if (res.status !== 0) return;
  t.equal(await git.ok(['rev-parse', 'main:big.bin'], { cwd: dir }), oid, 'the clone holds the file, hashed by git on arrival');
  t.equal(await git.ok(['cat-file', '-s', oid], { cwd: dir }), String(SIZE));
});
