import t, { type Test } from 'tap';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { rawRequest } from '../helpers/raw-http.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, pkt, postUploadPack, protocol, PROTOCOLS, responseLines, ROOT, v2Request, write } from './helpers.js';

/**
 * Bad input to upload-pack (API §14): what git itself could send wrong, or a client that is not
 * git. Protocol errors are an `ERR` line (HTTP 200: git prints `remote error: …`); a body that is
 * not one (bad gzip, too large, wrong type) is the API's 4xx; never a 5xx, never a hang.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['read'] });
const git = gitClient(t);
await createRepo(s, 'demo');
const tip = await write(s, 'demo', ROOT, { bookmark: 'main', files: { 'a.txt': 'a\n' } });
const missing = 'f'.repeat(40);

async function errLine(t: Test, body: string | Buffer, version: 0 | 2, pattern: RegExp): Promise<void> {
  const res = await postUploadPack(s, 'demo', token, body, { version });
  t.equal(res.status, 200, `answered within the protocol: ${pattern}`);
  const lines = responseLines(res.body);
  const err = lines.find((l) => l.startsWith('ERR '));
  t.match(err, pattern, `v${version}: ${lines.join(' | ')}`);
}

t.test('git bad input - malformed pkt-lines are an ERR line', async (t) => {
  for (const version of [0, 2] as const) {
    await errLine(t, 'zzzzwant', version, /bad line length character/);
    await errLine(t, '0003', version, /bad line length/);
    await errLine(t, '00ffcommand=fetch\n', version, /truncated pkt-line/);
    await errLine(t, '00', version, /truncated pkt-line length/);
  }
});

t.test('git bad input - unknown commands, capabilities and arguments are an ERR line', async (t) => {
  await errLine(t, v2Request('frobnicate', []), 2, /invalid command 'frobnicate'/);
  await errLine(t, [pkt('command=fetch'), pkt('hash-algorithm=md5'), '0001', '0000'].join(''), 2, /unknown capability/);
  await errLine(t, [pkt('command=fetch'), pkt('object-format=sha256'), '0001', '0000'].join(''), 2, /unsupported object format/);
  await errLine(t, v2Request('fetch', [`want ${tip.commit}`, 'sparkle']), 2, /unexpected line: 'sparkle'/);
  await errLine(t, v2Request('ls-refs', ['sparkle']), 2, /unexpected line/);
  await errLine(t, pkt('agent=git/2'), 2, /no command requested/);
  await errLine(t, '', 2, /expected a command/);
  await errLine(t, [pkt(`want ${tip.commit} side-band-64k`), pkt('sparkle'), '0000'].join(''), 0, /expected a want or shallow line/);
  await errLine(t, [pkt(`want ${tip.commit}`), '0000', pkt('sparkle')].join(''), 0, /expected a have line/);
  await errLine(t, v2Request('fetch', ['want 1234']), 2, /expected an object id/);
  await errLine(t, v2Request('fetch', [`want ${tip.commit}`, 'deepen 0']), 2, /invalid depth/);
  await errLine(t, v2Request('fetch', [`want ${tip.commit}`, 'deepen 1', 'deepen-since 1']), 2, /cannot be used together/);
  await errLine(t, v2Request('fetch', [`want ${tip.commit}`, 'deepen-not refs/heads/nowhere']), 2, /ambiguous deepen-not/);
  await errLine(t, v2Request('fetch', [`want ${tip.commit}`, 'filter sparse:oid=abc']), 2, /filter 'sparse:oid=abc' is not supported/);
});

t.test('git bad input - a want the repository does not hold is "not our ref", and git prints it', async (t) => {
  await errLine(t, v2Request('fetch', [`want ${missing}`, 'done']), 2, new RegExp(`not our ref ${missing}`));
  await errLine(t, [pkt(`want ${missing} side-band-64k`), '0000', pkt('done')].join(''), 0, new RegExp(`not our ref ${missing}`));
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `want-missing-v${v}`);
    await git.ok(['init', '--quiet', dir]);
    const res = await git.run([...protocol(v), 'fetch', cloneUrl(s, 'demo', token), missing], { cwd: dir });
    t.not(res.status, 0);
    t.match(res.stderr, new RegExp(`remote error: upload-pack: not our ref ${missing}`), `v${v}: git prints the server's message`);
  }
});

t.test('git bad input - a body that is not one: bad gzip 400, inflating past the limit 413, wrong type 400', async (t) => {
  const badGzip = await postUploadPack(s, 'demo', token, Buffer.from('not gzip at all'), { headers: { 'content-encoding': 'gzip' } });
  t.equal(badGzip.status, 400);
  t.match(JSON.parse(badGzip.body.toString()).error, { code: 'INVALID_REQUEST', message: /not valid gzip/ });

  const bomb = gzipSync(Buffer.alloc(17 * 1024 * 1024, 0x30));
  t.ok(bomb.length < 64 * 1024, `a small body (${bomb.length} bytes)`);
  const inflated = await postUploadPack(s, 'demo', token, bomb, { headers: { 'content-encoding': 'gzip' } });
  t.equal(inflated.status, 413);
  t.equal(JSON.parse(inflated.body.toString()).error.code, 'PAYLOAD_TOO_LARGE');

  // Refused on its declared length, before a byte of it is read (a client writing on gets its connection closed).
  const tooLarge = await rawRequest(s.port, {
    method: 'POST',
    path: '/acme/demo.git/git-upload-pack',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-git-upload-pack-request' },
    declared: { length: 17 * 1024 * 1024, partial: 0 },
  });
  t.equal(tooLarge.status, 413);

  const json = await postUploadPack(s, 'demo', token, '{}', { headers: { 'content-type': 'application/json' } });
  t.equal(json.status, 400);
  t.match(JSON.parse(json.body.toString()).error.message, /application\/x-git-upload-pack-request/);

  const compressed = await postUploadPack(s, 'demo', token, gzipSync(v2Request('ls-refs', [])), { headers: { 'content-encoding': 'gzip' } });
  t.equal(compressed.status, 200, 'a gzip body that is one works');
  t.same(responseLines(compressed.body), [`${tip.commit} HEAD`, `${tip.commit} refs/heads/main`, '0000']);
});

t.test('git bad input - the dumb protocol and other methods are not served; a read token may not push', async (t) => {
  const auth = { authorization: `Bearer ${token}` };
  const receive = await fetch(`${s.url}/acme/demo.git/info/refs?service=git-receive-pack`, { headers: auth });
  t.equal(receive.status, 403);
  t.match(((await receive.json()) as { error: { message: string } }).error.message, /git:write/);
  const dumb = await fetch(`${s.url}/acme/demo.git/info/refs`, { headers: auth });
  t.equal(dumb.status, 404);
  const head = await fetch(`${s.url}/acme/demo.git/HEAD`, { headers: auth });
  t.equal(head.status, 404);
  const post = await fetch(`${s.url}/acme/demo.git/git-receive-pack`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-git-receive-pack-request' }, body: '0000' });
  t.equal(post.status, 403);
  const put = await fetch(`${s.url}/acme/demo.git/info/refs?service=git-upload-pack`, { method: 'PUT', headers: auth });
  t.equal(put.status, 405);
  t.equal(put.headers.get('allow'), 'GET');
  const unknownQuery = await fetch(`${s.url}/acme/demo.git/info/refs?service=git-upload-pack&x=1`, { headers: auth });
  t.equal(unknownQuery.status, 400);
});

t.test('git bad input - after all of it the server still serves a clone', async (t) => {
  const dir = join(git.dir, 'after');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'demo', token), dir]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), tip.commit);
  t.notOk(s.logs.some((l) => /"level":"error"/.test(l)), 'nothing was logged as an error');
});

t.test('git bad input - an Idempotency-Key on upload-pack is ignored, not a 500', async (t) => {
  const res = await postUploadPack(s, 'demo', token, v2Request('ls-refs', []), { headers: { 'idempotency-key': 'k1' } });
  t.equal(res.status, 200);
  t.match(responseLines(res.body).join(' '), /refs\/heads\/main/);
});
