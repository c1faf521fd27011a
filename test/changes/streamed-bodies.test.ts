import t from 'tap';
import { createHash } from 'node:crypto';
import { ROOT, exportRepo, startWithRepo, type RepoFixture } from './helpers.js';
import { streamRequest } from './streaming-client.js';

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
  const { under } = await import('../../src/storage/keys.js');
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  const storage = openStorage(f.s.dataDir);
  try {
    t.equal(storage.chunks.getKeysCount(under([repoId])), 0, 'no chunk is left over');
  } finally {
    await storage.close();
  }
});
