import t from 'tap';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { serverForFile } from '../helpers/server.js';
import { sampleMemory } from '../git/server-memory.js';

/**
 * A request refused before its body ended (no token: 401 at once) has the rest of its body
 * dropped as it arrives, not held by the server up to the route's limit until the connection
 * closes: twenty clients without credentials sending 16 MiB each to git's upload-pack would
 * otherwise have the server hold 320 MiB.
 */
const MiB = 1024 * 1024;
const CLIENTS = 20;
const BODY = 16 * MiB;

const s = await serverForFile(t);
const created = await s.api('POST', '/acme/repos', { body: { name: 'r' } });
if (created.status !== 201) throw new Error(`repo create failed: ${created.status} ${created.text}`);

/** Sends the request's head, waits for the refusal, then sends the whole body (the server may read it or not). */
async function refusedUpload(): Promise<{ socket: Socket; answer: string }> {
  const socket = connect(s.port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(`POST /acme/r.git/git-upload-pack HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-git-upload-pack-request\r\ncontent-length: ${BODY}\r\n\r\n`);
  while (!answer.includes('\r\n\r\n')) await sleep(10);
  const piece = Buffer.alloc(MiB, 0x30);
  const sent = (async () => {
    for (let i = 0; i < BODY / MiB && !socket.destroyed; i++) if (!socket.write(piece)) await Promise.race([once(socket, 'drain'), once(socket, 'close')]);
  })();
  // A server that stops reading leaves the rest in the socket buffers: no growth either way.
  await Promise.race([sent, sleep(20_000)]);
  return { socket, answer };
}

t.test('a refused request\'s body is dropped as it arrives, not held', async (t) => {
  const memory = sampleMemory(s.process.pid!);
  const uploads = await Promise.all(Array.from({ length: CLIENTS }, refusedUpload));
  await sleep(500);
  const growth = await memory.stop();
  for (const { socket } of uploads) socket.destroy();
  t.ok(uploads.every((u) => u.answer.startsWith('HTTP/1.1 401 ')), 'each refused with 401 before its body');
  t.comment(`${CLIENTS} × ${BODY / MiB} MiB sent after a 401; server growth: ${growth.describe()}`);
  t.ok(growth.grew.anon < 96 * MiB, `the server's anonymous memory grew by ${(growth.grew.anon / MiB).toFixed(0)} MiB`);
  t.equal((await fetch(`${s.url}/healthz`)).status, 200, 'still serving');
});
