import t from 'tap';
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { ROOT, exportRepo, startWithRepo, type RepoFixture } from './helpers.js';
import { streamRequest } from './streaming-client.js';
import { readWriteBody } from '../../src/http/write-body-reader.js';
import type { Storage } from '../../src/storage/database.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function bytes(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + seed * 17 + (i >> 10)) & 0xff;
  return out;
}

const gitOid = (data: Buffer): string => createHash('sha1').update(`blob ${data.length}\0`).update(data).digest('hex');

/** Sends `body` in 10,000-byte pieces without a declared length: the streaming parser reads it. */
async function streamJson(f: RepoFixture, method: string, path: string, body: unknown): Promise<{ status: number; json: any; text: string }> {
  const raw = Buffer.from(JSON.stringify(body));
  const pieces = Array.from({ length: Math.ceil(raw.length / 10_000) }, (_, i) => raw.subarray(i * 10_000, (i + 1) * 10_000));
  return streamRequest(`${f.s.url}/v1${f.base}${path}`, method, { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' }, pieces);
}

t.test('streamed bodies - contents in any size, encoding and key order are stored byte-exact', async (t) => {
  const f = await startWithRepo(t, 'streamed');
  // UTF-8 text with multi-byte characters, so pieces split characters and surrogate pairs.
  const text = 'héllo wörld — 日本語 🎉🎉 '.repeat(40_000);
  const files = {
    small: Buffer.from('small\n'),
    text: Buffer.from(text, 'utf8'),
    mid: bytes(300 * KiB, 1),
    big: bytes(2 * MiB + 3, 2),
  };
  const res = await streamJson(f, 'POST', '/apply-ops', {
    base_change_id: ROOT,
    message: 'streamed',
    ops: [
      // `encoding` after `content`: decided once the op ends (kept raw, then decoded).
      { op: 'write', path: 'small.txt', content: 'small\n', encoding: 'utf-8' },
      { op: 'write', path: 'text.txt', content: text },
      { op: 'write', path: 'mid.bin', content: files.mid.toString('base64'), encoding: 'base64' },
      { op: 'write', path: 'big.bin', content: files.big.toString('base64'), encoding: 'base64' },
      // `encoding` first: decoded as it streams.
      { op: 'write', path: 'big-first.bin', encoding: 'base64', content: files.big.toString('base64') },
      { op: 'write', path: 'wrapped.bin', encoding: 'base64', content: files.mid.toString('base64').replace(/.{76}/g, '$&\r\n') },
    ],
  });
  t.equal(res.status, 201, res.text.slice(0, 300));
  const commit = res.json.change.current_commit_oid as string;

  // The same contents through POST /changes (`files`: base64 only).
  const viaFiles = await streamJson(f, 'POST', '/changes', {
    base_change_id: res.json.change.id,
    files: [
      { path: 'files/big.bin', content: files.big.toString('base64') },
      { path: 'files/text.txt', content: files.text.toString('base64'), encoding: 'base64' },
      { path: 'small.txt', action: 'delete' },
    ],
  });
  t.equal(viaFiles.status, 201, viaFiles.text.slice(0, 300));
  // Small enough to be sent whole before the answer (an early answer may reset a large upload).
  const bad = await streamJson(f, 'POST', '/changes', { base_change_id: ROOT, files: [{ path: 'x', content: text.slice(0, 5000) }] });
  t.equal(bad.status, 400, `files contents are base64: ${bad.text.slice(0, 300)}`);

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null);
  const expect: Array<[string, string, Buffer]> = [
    [commit, 'small.txt', files.small],
    [commit, 'text.txt', files.text],
    [commit, 'mid.bin', files.mid],
    [commit, 'big.bin', files.big],
    [commit, 'big-first.bin', files.big],
    [commit, 'wrapped.bin', files.mid],
    [viaFiles.json.current_commit_oid, 'files/big.bin', files.big],
    [viaFiles.json.current_commit_oid, 'files/text.txt', files.text],
  ];
  for (const [at, path, data] of expect) t.equal(x.git('rev-parse', `${at}:${path}`).stdout.trim(), gitOid(data), `${path} is byte-exact`);
  t.not(x.git('cat-file', '-e', `${viaFiles.json.current_commit_oid}:small.txt`).status, 0, 'the delete applied');
  t.ok(x.git('cat-file', 'blob', `${commit}:big.bin`).raw.equals(files.big));
});

t.test('streamed bodies - a body that fails after contents were staged leaves nothing behind', async (t) => {
  const f = await startWithRepo(t, 'streamed-fail');
  const big = bytes(3 * MiB, 3);
  const unknownChange = 'k'.repeat(32);
  const res = await streamJson(f, 'POST', '/apply-ops', { change_id: unknownChange, ops: [{ op: 'write', path: 'big.bin', encoding: 'base64', content: big.toString('base64') }] });
  t.equal(res.status, 404);
  t.equal(res.json.error.code, 'CHANGE_NOT_FOUND');
  const twice = await streamJson(f, 'POST', '/apply-ops', { base_change_id: ROOT, ops: [{ op: 'delete', path: 'x', content: big.toString('base64') }] });
  t.equal(twice.status, 400, 'content on a delete');
  // The staged chunks were dropped: the repository's chunk range is empty.
  const { openStorage } = await import('../../src/storage/database.js');
  const { Ranges } = await import('../../src/storage/keys.js');
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  const storage = openStorage(f.s.dataDir);
  try {
    t.equal(storage.chunks.getKeysCount(Ranges.chunks(repoId)), 0, 'no chunk is left over');
  } finally {
    await storage.close();
  }
});

/**
 * Sends `head`, waits for the server's answer, then sends `tail` on the same request anyway, as
 * a client that does not read before it has written its whole body does. Resolves with the
 * answer's status line once the tail is written or the server has closed the connection.
 */
function answerMidBody(url: string, headers: Record<string, string>, head: Buffer, tail: Buffer[]): Promise<string> {
  const { hostname, port, pathname } = new URL(url);
  const length = head.length + tail.reduce((n, b) => n + b.length, 0);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('error', () => resolve(answer));
    socket.on('close', () => resolve(answer));
    const sendTail = async (): Promise<void> => {
      for (const piece of tail) {
        if (socket.destroyed) break;
        if (!socket.write(piece)) await new Promise((r) => socket.once('drain', r).once('close', r));
      }
      socket.end();
    };
    socket.on('data', (d: Buffer) => {
      const first = answer === '';
      answer += d.toString('latin1');
      // A failed write closes the socket, which resolves with the answer read so far.
      if (first) sendTail().catch(() => socket.destroy());
    });
    const lines = [`POST ${pathname} HTTP/1.1`, `host: ${hostname}:${port}`, `content-length: ${length}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    socket.write(head);
  });
}

t.test('streamed bodies - an error answered while the body is still arriving leaves the server serving', async (t) => {
  const f = await startWithRepo(t, 'streamed-early-error');
  const headers = { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' };
  // The first content fails as soon as it ends (it is not base64) and is answered 400; the client
  // then sends the 30 MiB that follow, which the server must drop without touching the response
  // it has finished.
  const head = Buffer.from(`{"base_change_id":"${ROOT}","ops":[{"op":"write","path":"bad.bin","encoding":"base64","content":"!!!!${'A'.repeat(3 * MiB)}"},`);
  const piece = Buffer.from(bytes(768 * KiB, 5).toString('base64'));
  const tail = [Buffer.from('{"op":"write","path":"big.bin","encoding":"base64","content":"'), ...Array.from({ length: 40 }, () => piece), Buffer.from('"}]}')];
  for (let i = 0; i < 3; i++) {
    const answer = await answerMidBody(`${f.s.url}/v1${f.base}/apply-ops`, headers, head, tail);
    t.match(answer, /^HTTP\/1\.1 400 /, `attempt ${i + 1}`);
    t.match(answer, /"code":"INVALID_REQUEST"/);
  }
  t.equal((await fetch(`${f.s.url}/healthz`)).status, 200, 'still serving');
  const ok = await f.s.api('POST', `${f.base}/apply-ops`, { body: { base_change_id: ROOT, ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }] } });
  t.equal(ok.status, 201, ok.text);
});

t.test('streamed bodies - a body dense with small values lets other work run while it is parsed', async (t) => {
  // Two million tokens in one chunk: parsed whole, it held the front end's thread for seconds.
  const body = Buffer.from(`{"base_change_id":"${ROOT}","ops":[],"x":[${'0,'.repeat(999_999)}0]}`);
  const { result: parsed, turns } = await turnsDuring(() =>
    readWriteBody(
      (async function* () {
        yield body;
      })(),
      { 'content-type': 'application/json' },
      // No file contents in this body, so nothing is staged in storage.
      { storage: undefined as unknown as Storage, repoId: 'repo_x', listKey: 'ops', defaultEncoding: 'utf-8', encodingFixed: false },
    ),
  );
  t.equal((parsed.body.x as unknown[]).length, 1_000_000);
  t.ok(turns > 10, `the event loop turned ${turns} times during the parse`);
});

/** `readWriteBody` on a body given as pieces, with how many pieces it took before it answered. */
async function parsePieces(pieces: Iterable<string>): Promise<{ error: unknown; taken: number }> {
  let taken = 0;
  const stream = (async function* () {
    for (const piece of asBuffers(pieces)) {
      taken++;
      yield piece;
    }
  })();
  // No file contents in these bodies, so nothing is staged in storage.
  const opts = { storage: undefined as unknown as Storage, repoId: 'repo_x', listKey: 'ops' as const, defaultEncoding: 'utf-8' as const, encodingFixed: false };
  const error = await readWriteBody(stream, { 'content-type': 'application/json' }, opts).then(() => null, (err: unknown) => err);
  return { error, taken };
}

function* asBuffers(pieces: Iterable<string>): Generator<Buffer> {
  for (const piece of pieces) yield Buffer.from(piece);
}

function* repeated(head: string, piece: string, count: number, tail: string): Generator<string> {
  yield head;
  for (let i = 0; i < count; i++) yield piece;
  yield tail;
}

t.test('streamed bodies - structure, keys and numbers are bounded as they arrive, not once held', async (t) => {
  // Each case would hold gigabytes if parsed to its end: a nesting of arrays (about 100 bytes of
  // heap per byte of body), a sea of nulls, one key and one number of 100 million characters.
  const cases: Array<[string, Iterable<string>, string, RegExp]> = [
    ['nested arrays', repeated('{"ops":[],"x":', '['.repeat(64 * KiB), 1000, ''), 'INVALID_REQUEST', /nests deeper than 32 levels/],
    ['a sea of nulls', repeated('{"ops":[],"x":[null', ',null'.repeat(16 * KiB), 1000, ']}'), 'PAYLOAD_TOO_LARGE', /more than 1048576 values/],
    ['a huge key', repeated('{"ops":[],"', 'k'.repeat(MiB), 100, '":1}'), 'PAYLOAD_TOO_LARGE', /outside file contents exceeds/],
    ['a huge number', repeated('{"ops":[],"x":1', '0'.repeat(MiB), 100, '}'), 'PAYLOAD_TOO_LARGE', /outside file contents exceeds/],
  ];
  for (const [name, pieces, code, message] of cases) {
    const { error, taken } = await parsePieces(pieces);
    t.match(error, { code, message }, name);
    t.ok(taken < 100, `${name}: refused after ${taken} pieces of the body`);
  }
  // Nesting up to the bound is still read.
  const { error } = await parsePieces([`{"ops":[],"x":${'['.repeat(31)}${']'.repeat(31)}}`]);
  t.equal(error, null, '32 levels are accepted');
});

t.test('streamed bodies - a body nesting too deep is answered 400 and the server keeps serving', async (t) => {
  const f = await startWithRepo(t, 'streamed-deep');
  const res = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' }, asBuffers(repeated(`{"base_change_id":"${ROOT}","ops":[],"x":`, '['.repeat(64 * KiB), 64, '')));
  t.equal(res.status, 400, res.text.slice(0, 300));
  t.equal(res.json?.error?.code, 'INVALID_REQUEST');
  t.match(res.json?.error?.message, /nests deeper than 32 levels/, 'refused for its nesting, as it arrived');
  t.equal((await fetch(`${f.s.url}/healthz`)).status, 200, 'still serving');
});
