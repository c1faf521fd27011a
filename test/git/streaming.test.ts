import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { READ_THREADS, TASKS_PER_READ_THREAD } from '../../src/actors/read-pool.js';
import { settledReaderLag } from '../helpers/metrics-text.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, v2Request } from './helpers.js';

/**
 * A pack is produced as the client takes it (API §14): a client that goes away, or stops reading,
 * ends the pack-pool task that builds its pack (and releases its snapshot). If tasks were left
 * waiting, the pack pool's slots (a few per thread) would fill and the next clone would never
 * start; each test ends with a clone. The pack (32 MiB, incompressible) is more than the
 * sockets' kernel buffers hold, so a client that stops reading does hold the server back.
 */
const s = await serverForFile(t);
const git = gitClient(t);
const MiB = 1024 * 1024;
/** Every slot of the server's pack pool (it runs on this machine: the same count of threads). */
const SLOTS = READ_THREADS * TASKS_PER_READ_THREAD;

await createRepo(s, 'big');
const token = await s.token();
const uploaded = await s.api('POST', '/acme/big/blobs', { raw: randomBytes(32 * MiB), headers: { 'content-type': 'application/octet-stream' } });
if (uploaded.status !== 201) throw new Error(uploaded.text);
const written = await s.api('POST', '/acme/big/apply-ops', { body: { base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path: 'big.bin', blob_oid: uploaded.json.oid }], bookmarks: [{ name: 'main' }] } });
if (written.status !== 201) throw new Error(written.text);
const head = written.json.change.current_commit_oid as string;

/** Starts a fetch of the whole repository on a raw socket; resolves once the response has begun. */
function startFetch(): Promise<Socket> {
  const body = v2Request('fetch', [`want ${head}`, 'no-progress', 'done']);
  return new Promise((resolve, reject) => {
    const socket = connect(s.port, '127.0.0.1', () => {
      socket.write(
        `POST /acme/big.git/git-upload-pack HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nGit-Protocol: version=2\r\n` +
          `Content-Type: application/x-git-upload-pack-request\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    socket.once('data', () => resolve(socket));
    socket.once('error', reject);
  });
}

async function cloneStillWorks(t: Test, name: string): Promise<void> {
  const dir = join(git.dir, name);
  await git.ok(['clone', '--quiet', '--bare', cloneUrl(s, 'big', token), dir]);
  t.equal(await git.ok(['rev-parse', 'main'], { cwd: dir }), head, 'a clone afterwards gets the whole repository');
}

t.test('git streaming - clients that go away in the middle of a pack free the tasks that built it', async (t) => {
  for (let round = 0; round < 2; round++) {
    const sockets = await Promise.all(Array.from({ length: SLOTS }, startFetch));
    for (const socket of sockets) socket.destroy();
  }
  await cloneStillWorks(t, 'after-aborts');
});

t.test('git streaming - clients that stop reading are disconnected, and their tasks end', async (t) => {
  // Every slot gets a client that reads the first bytes and then nothing more, keeping its connection:
  // the server closes them (uWS's timeout on a pending write) and the clone gets its turn.
  const sockets = await Promise.all(Array.from({ length: SLOTS }, startFetch));
  for (const socket of sockets) socket.pause();
  t.teardown(() => sockets.forEach((socket) => socket.destroy()));
  await cloneStillWorks(t, 'after-stalls');
});

t.test('git streaming - a pack waiting for its client holds no LMDB snapshot', async (t) => {
  // A held snapshot keeps LMDB from reusing the pages every later write frees, so the writes
  // meanwhile grow the file; the metric counts the writes committed since the oldest snapshot.
  await createRepo(s, 'beside');
  const socket = await startFetch();
  socket.pause();
  t.teardown(() => socket.destroy());
  const WRITES = 30;
  for (let i = 0; i < WRITES; i++) {
    const res = await s.api('POST', '/acme/beside/apply-ops', { body: { base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path: `f${i}.txt`, content: `${i}` }] } });
    t.equal(res.status, 201, `write ${i}`);
  }
  const lag = await settledReaderLag(s, WRITES / 3);
  t.ok(lag < WRITES / 3, `the oldest snapshot is younger than the ${WRITES} writes made while the pack waited (lag ${lag})`);
});
