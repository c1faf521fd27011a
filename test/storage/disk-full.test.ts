import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, applyOps, startWithRepo, write } from '../changes/helpers.js';

/**
 * A full disk, made real with a file-size limit on the running server (`prlimit`): LMDB's data
 * file may not grow, so a commit that needs new pages fails with EFBIG as it would with ENOSPC.
 * The writes are a few hundred KiB, applied by the repository's actor.
 */
const KiB = 1024;

function limitFileSize(pid: number, bytes: number | 'unlimited'): void {
  execFileSync('prlimit', ['--pid', String(pid), `--fsize=${bytes}:unlimited`]);
}

const binary = (path: string, bytes: Buffer): Record<string, unknown> => ({ op: 'write', path, content: bytes.toString('base64'), encoding: 'base64' });

t.test('a write the disk cannot take is answered 503 and saves nothing; writes succeed again once there is room', async (t) => {
  const f = await startWithRepo(t, 'full');
  const { s } = f;
  const first = await applyOps(f, { base_change_id: ROOT, ops: [write('a.txt', 'one\n')] });
  t.equal(first.status, 201, first.text);
  const head = first.json.change.id as string;
  // Every write moves the default bookmark, so the changes reachable from it show what was saved.
  const bookmarks = [{ name: (await s.api('GET', f.base)).json.default_bookmark as string }];
  const changes = async (): Promise<string[]> => ((await s.api('GET', `${f.base}/changes`)).json.changes as Array<{ id: string }>).map((c) => c.id).sort();
  const before = await changes();

  limitFileSize(s.process.pid!, statSync(join(s.dataDir, 'db', 'data.mdb')).size);
  try {
    for (let i = 0; i < 3; i++) {
      const res = await applyOps(f, { base_change_id: head, ops: [binary(`big-${i}.bin`, randomBytes(400 * KiB))], bookmarks });
      t.equal(res.status, 503, res.text);
      t.equal(res.json.error.code, 'UNAVAILABLE');
      t.ok(res.json.error.trace_id, 'a 5xx carries its trace id');
      t.ok(Number(res.headers.get('retry-after')) > 0, 'with Retry-After');
    }
    t.same(await changes(), before, 'no change was saved');
    const read = await s.api('GET', `${f.base}/content?path=a.txt&change_id=${head}`);
    t.equal(read.status, 200, 'reads go on');
  } finally {
    limitFileSize(s.process.pid!, 'unlimited');
  }

  const content = randomBytes(400 * KiB);
  const again = await applyOps(f, { base_change_id: head, ops: [binary('big.bin', content)], bookmarks });
  t.equal(again.status, 201, again.text);
  const back = await s.api('GET', `${f.base}/content?path=big.bin&change_id=${again.json.change.id}`);
  t.equal(Buffer.from(back.json.content, 'base64').compare(content), 0, 'the write after the limit is lifted reads back');

  await s.stop();
  await s.restart();
  t.same(await changes(), [...before, again.json.change.id].sort(), 'after a restart: the first write and the last, nothing of the refused ones');
});

t.test('below REPOHOST_MIN_FREE_BYTES of free disk, large bodies are refused 503 before anything is stored; small writes go on', async (t) => {
  const f = await startWithRepo(t, 'nearly-full', { env: { REPOHOST_MIN_FREE_BYTES: String(2 ** 52) } });
  const { s } = f;
  const big = await applyOps(f, { base_change_id: ROOT, ops: [binary('big.bin', randomBytes(2 * 1024 * KiB))] });
  t.equal(big.status, 503, big.text);
  t.equal(big.json.error.code, 'UNAVAILABLE');
  t.match(big.json.error.message, /nearly full/);
  t.ok(Number(big.headers.get('retry-after')) > 0);
  const blob = await s.api('POST', `${f.base}/blobs`, { raw: randomBytes(2 * 1024 * KiB), headers: { 'content-type': 'application/octet-stream' } });
  t.equal(blob.status, 503, blob.text);
  const small = await applyOps(f, { base_change_id: ROOT, ops: [write('a.txt', 'one\n')] });
  t.equal(small.status, 201, small.text);
  const anonymous = await fetch(`${s.url}/v1${f.base}/apply-ops`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ base_change_id: ROOT, ops: [binary('big.bin', randomBytes(2 * 1024 * KiB))] }) });
  t.equal(anonymous.status, 401, 'the token is checked first');
});
