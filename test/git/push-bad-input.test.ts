import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { rawRequest } from '../helpers/raw-http.js';
import { serverForFile, startTestServer, type TestServer } from '../helpers/server.js';
import { BLOB, COMMIT, TREE, entry, entryHeader, pack, refDelta, delta, whole } from '../helpers/pack-builder.js';
import { openStorage } from '../../src/storage/database.js';
import { Ranges } from '../../src/storage/keys.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { cloneUrl, createRepo, gitClient, pkt, postReceivePack, responsePackets, responseLines, ROOT, write } from './helpers.js';

/**
 * Bad input to receive-pack (API §14): every refusal is a message git prints — an `ERR` line for
 * a request git would never send, `unpack <reason>` with `ng <ref> unpacker error` for a pack that
 * fails, `ng <ref> <reason>` for one ref — never a 5xx, never a hang, and nothing of a refused pack
 * stays in the repository.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['write'] });
const git = gitClient(t);
await createRepo(s, 'bad');
const tip = await write(s, 'bad', ROOT, { bookmark: 'main', files: { 'a.txt': 'a\n' } });
const ZERO = '0'.repeat(40);

async function repoId(server: TestServer, repo: string): Promise<string> {
  return (await server.api('GET', `/${server.org}/${repo}`)).json.id as string;
}

/** Objects and pending marks of a repository, read from the data directory. */
function stored(server: TestServer, id: string): { objects: number; pending: number } {
  const storage = openStorage(server.dataDir);
  try {
    return { objects: storage.objects.getKeysCount(Ranges.objects(id)), pending: storage.meta.getKeysCount(Ranges.pending(id)) };
  } finally {
    void storage.close();
  }
}

const badId = await repoId(s, 'bad');

/** The report-status lines of a response, unwrapped from side-band 1 when it is there. */
function reportLines(body: Buffer): string[] {
  const packets = responsePackets(body);
  const first = packets[0];
  if (first?.kind === 'data' && first.data[0] === 1) {
    const inner = Buffer.concat(packets.filter((p): p is { kind: 'data'; data: Buffer } => p.kind === 'data' && p.data[0] === 1).map((p) => p.data.subarray(1)));
    return responseLines(inner);
  }
  return responseLines(body);
}

/** A command's pkt-line with the capabilities after a NUL (no newline before the NUL, as git writes it). */
function firstLine(line: string, caps: string): string {
  const payload = Buffer.from(`${line}\0${caps}\n`);
  return `${(payload.length + 4).toString(16).padStart(4, '0')}${line}\0${caps}\n`;
}

function requestBody(lines: string[], packBytes: Buffer | null, caps = 'report-status side-band-64k'): Buffer {
  const head = [firstLine(lines[0]!, caps), ...lines.slice(1).map(pkt), '0000'].join('');
  return Buffer.concat([Buffer.from(head), packBytes ?? Buffer.alloc(0)]);
}

interface Built {
  commit: string;
  objects: Buffer[];
}

/** A commit on `parent` (or a root) whose tree holds the given entries, as pack entries. */
function commitEntries(entries: Array<{ name: string; mode?: string; content: string }>, parent: string | null = null): Built {
  const objects: Buffer[] = [];
  const treeParts: Buffer[] = [];
  const sorted = [...entries].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  for (const e of sorted) {
    const content = Buffer.from(e.content);
    objects.push(whole(content));
    treeParts.push(Buffer.from(`${e.mode ?? '100644'} ${e.name}\0`), Buffer.from(hashObject('blob', content), 'hex'));
  }
  const tree = Buffer.concat(treeParts);
  objects.push(entry(TREE, tree));
  const commit = Buffer.from(`tree ${hashObject('tree', tree)}\n${parent ? `parent ${parent}\n` : ''}author A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n\nhand-made\n`);
  objects.push(entry(COMMIT, commit));
  return { commit: hashObject('commit', commit), objects };
}

async function refused(t: Test, body: Buffer | string, expected: string[], what: string): Promise<void> {
  const before = stored(s, badId);
  const res = await postReceivePack(s, 'bad', token, body);
  t.equal(res.status, 200, `${what}: answered within the protocol`);
  t.same(reportLines(res.body), expected, what);
  t.same(stored(s, badId), before, `${what}: nothing stored`);
}

t.test('git push bad input - malformed commands are an ERR line git prints', async (t) => {
  const errLine = async (body: string, pattern: RegExp): Promise<void> => {
    const res = await postReceivePack(s, 'bad', token, body);
    t.equal(res.status, 200);
    t.match(responseLines(res.body).find((l) => l.startsWith('ERR ')), pattern);
  };
  await errLine('zzzzwant', /protocol error: malformed pkt-line in the commands/);
  await errLine('00ffnot enough', /protocol error: malformed pkt-line in the commands/);
  await errLine(`${pkt('not a command')}0000`, /expected "<old-oid> <new-oid> <ref>"/);
  await errLine(`${pkt(`${ZERO} ${tip.commit} refs/heads/a`)}${pkt(`${ZERO} ${tip.commit} refs/heads/a`)}0000`, /the ref refs\/heads\/a is updated twice/);
  await errLine(pkt(`${ZERO} ${tip.commit} refs/heads/a`), /the commands end without a flush/);
  const nothing = await postReceivePack(s, 'bad', token, '0000');
  t.equal(nothing.status, 200, 'a flush alone: nothing to do');
  t.equal(nothing.body.length, 0);
});

t.test('git push bad input - a truncated pack, a wrong trailer and data after it are unpack errors', async (t) => {
  const built = commitEntries([{ name: 'x.txt', content: 'x\n' }], tip.commit);
  const good = pack(built.objects);
  const cmd = [`${tip.commit} ${built.commit} refs/heads/main`];
  await refused(t, requestBody(cmd, good.subarray(0, good.length - 30)), ['unpack the pack is truncated', 'ng refs/heads/main unpacker error', '0000'], 'truncated');
  const damaged = Buffer.from(good);
  damaged[damaged.length - 1]! ^= 0xff;
  await refused(t, requestBody(cmd, damaged), ['unpack the pack checksum does not match its content', 'ng refs/heads/main unpacker error', '0000'], 'wrong trailer');
  await refused(t, requestBody(cmd, Buffer.concat([good, Buffer.from('more')])), ['unpack data follows the pack checksum', 'ng refs/heads/main unpacker error', '0000'], 'trailing data');
  await refused(t, requestBody(cmd, null), ['unpack the pack is truncated', 'ng refs/heads/main unpacker error', '0000'], 'no pack at all');
  t.equal((await s.api('GET', '/acme/bad/bookmarks/main')).json.change_id, tip.id, 'main never moved');
});

t.test('git push bad input - an object whose bytes do not hash to what the tree names is missing', async (t) => {
  const built = commitEntries([{ name: 'x.txt', content: 'genuine\n' }], tip.commit);
  // The blob sent is not the one the tree names: its oid is computed from what arrives.
  built.objects[0] = whole(Buffer.from('forged!\n'));
  await refused(t, requestBody([`${tip.commit} ${built.commit} refs/heads/main`], pack(built.objects)), ['unpack the pack is incomplete: 1 objects its objects name are missing', 'ng refs/heads/main unpacker error', '0000'], 'forged blob');
});

t.test('git push bad input - tree entries named .git (any spelling), .. or with a / are refused', async (t) => {
  for (const name of ['.git', '.GIT', 'git~1', '.git.', '..', '.', 'a/b']) {
    const built = commitEntries([{ name, content: 'hook\n' }], tip.commit);
    const res = await postReceivePack(s, 'bad', token, requestBody([`${tip.commit} ${built.commit} refs/heads/main`], pack(built.objects)));
    const lines = reportLines(res.body);
    t.match(lines[0], /^unpack object [0-9a-f]{40}: the tree (has an entry named|entry ".*" contains a "\/")/, `${JSON.stringify(name)}: ${lines[0]}`);
    t.equal(lines[1], 'ng refs/heads/main unpacker error');
  }
  const mode = commitEntries([{ name: 'x', mode: '100664', content: 'x\n' }], tip.commit);
  const res = await postReceivePack(s, 'bad', token, requestBody([`${tip.commit} ${mode.commit} refs/heads/main`], pack(mode.objects)));
  t.match(reportLines(res.body)[0], /mode "100664", which git fsck refuses/);
  const bad = Buffer.from('tree nothex\nauthor A <a@example.com> 1 +0000\ncommitter A <a@example.com> 1 +0000\n\nx\n');
  const res2 = await postReceivePack(s, 'bad', token, requestBody([`${ZERO} ${hashObject('commit', bad)} refs/heads/other`], pack([entry(COMMIT, bad)])));
  t.match(reportLines(res2.body)[0], /does not start with a valid tree line/);
  t.equal((await s.api('GET', '/acme/bad/bookmarks/other')).status, 404);
});

t.test('git push bad input - declared sizes: a huge claim and a small claim over a bomb are refused at once', async (t) => {
  const cmd = [`${ZERO} ${'1'.repeat(40)} refs/heads/bomb`];
  await refused(t, requestBody(cmd, pack([Buffer.concat([entryHeader(BLOB, 4 * 1024 ** 3), Buffer.from([0x78, 0x9c])])])), ['unpack an object of 4294967296 bytes is over the limit of 536870912 bytes per object', 'ng refs/heads/bomb unpacker error', '0000'], 'huge claim');
  const zeros = whole(Buffer.alloc(64 * 1024 * 1024), 1024);
  t.ok(zeros.length < 128 * 1024, `a small pack (${zeros.length} bytes)`);
  await refused(t, requestBody(cmd, pack([zeros])), ['unpack an object inflates to more than its declared size', 'ng refs/heads/bomb unpacker error', '0000'], 'bomb');
});

t.test('git push bad input - a thin pack naming a base the repository lacks is refused', async (t) => {
  const missingBase = hashObject('blob', Buffer.from('nowhere\n'));
  await refused(t, requestBody([`${ZERO} ${'2'.repeat(40)} refs/heads/thin`], pack([refDelta(missingBase, delta(8, 4, 'more'))])), ['unpack 1 deltas have a base that is neither in the pack nor already held', 'ng refs/heads/thin unpacker error', '0000'], 'thin');
});

t.test('git push bad input - refs outside heads and tags, stale old oids and the default bookmark are ng', async (t) => {
  const built = commitEntries([{ name: 'ok.txt', content: 'ok\n' }], tip.commit);
  const res = await postReceivePack(
    s,
    'bad',
    token,
    requestBody([`${ZERO} ${built.commit} refs/meta/x`, `${'3'.repeat(40)} ${built.commit} refs/heads/main`, `${tip.commit} ${ZERO} refs/heads/main2`, `${ZERO} ${built.commit} refs/heads/bad..name`], pack(built.objects)),
  );
  t.same(reportLines(res.body), [
    'unpack ok',
    'ng refs/meta/x only refs/heads/* and refs/tags/* can be pushed here',
    'ng refs/heads/main stale info',
    'ng refs/heads/main2 stale info',
    'ng refs/heads/bad..name invalid branch name: must not contain ".."',
    '0000',
  ]);
  const del = await postReceivePack(s, 'bad', token, requestBody([`${tip.commit} ${ZERO} refs/heads/main`], null));
  t.same(reportLines(del.body), ['unpack ok', 'ng refs/heads/main refusing to delete the default bookmark; change the default bookmark first', '0000']);
  const blobRef = await postReceivePack(s, 'bad', token, requestBody([`${ZERO} ${hashObject('blob', Buffer.from('ok\n'))} refs/heads/blob`], pack(built.objects)));
  t.same(reportLines(blobRef.body), ['unpack ok', 'ng refs/heads/blob a branch must point at a commit, not a blob', '0000']);
  t.same(stored(s, badId).pending, 0, 'nothing left pending');
});

t.test('git push bad input - without side-band the report is plain pkt-lines; without report-status nothing is said', async (t) => {
  const res = await postReceivePack(s, 'bad', token, requestBody([`${'4'.repeat(40)} ${ZERO} refs/heads/nope`], null, 'report-status'));
  t.same(responseLines(res.body), ['unpack ok', 'ng refs/heads/nope stale info', '0000']);
  const quiet = await postReceivePack(s, 'bad', token, requestBody([`${'4'.repeat(40)} ${ZERO} refs/heads/nope`], null, 'agent=x'));
  t.equal(quiet.body.length, 0);
});

t.test('git push bad input - a body that is not one: wrong type 400, bad gzip 400, a gzip push works', async (t) => {
  const json = await postReceivePack(s, 'bad', token, '{}', { 'content-type': 'application/json' });
  t.equal(json.status, 400);
  t.match(JSON.parse(json.body.toString()).error.message, /application\/x-git-receive-pack-request/);
  const badGzip = await postReceivePack(s, 'bad', token, 'not gzip', { 'content-encoding': 'gzip' });
  t.equal(badGzip.status, 400);
  t.match(JSON.parse(badGzip.body.toString()).error, { code: 'INVALID_REQUEST', message: /not valid gzip/ });
  const built = commitEntries([{ name: 'gz.txt', content: 'gz\n' }], tip.commit);
  const gz = await postReceivePack(s, 'bad', token, gzipSync(requestBody([`${ZERO} ${built.commit} refs/heads/gz`], pack(built.objects))), { 'content-encoding': 'gzip' });
  t.same(reportLines(gz.body), ['unpack ok', 'ok refs/heads/gz', '0000']);
});

t.test('git push bad input - a pack refused after its first batches were stored leaves nothing', async (t) => {
  // More objects than one storage batch holds: the early batches are stored (pending) before the trailer fails.
  const files = Array.from({ length: 2100 }, (_, i) => ({ name: `f${String(i).padStart(5, '0')}`, content: `file ${i} ${randomBytes(8).toString('hex')}\n` }));
  const built = commitEntries(files, tip.commit);
  const good = pack(built.objects);
  const damaged = Buffer.from(good);
  damaged[damaged.length - 1]! ^= 0xff;
  await refused(t, requestBody([`${tip.commit} ${built.commit} refs/heads/main`], damaged), ['unpack the pack checksum does not match its content', 'ng refs/heads/main unpacker error', '0000'], 'large pack, bad trailer');
  const res = await postReceivePack(s, 'bad', token, requestBody([`${tip.commit} ${built.commit} refs/heads/big`], good));
  t.same(reportLines(res.body), ['unpack ok', 'ng refs/heads/big stale info', '0000'], 'refused by its ref alone');
  t.same(stored(s, badId).pending, 0, 'its stored batches were taken back');
});

t.test('git push bad input - a read-only token is refused before the pack is read; a token for another repository too', async (t) => {
  await createRepo(s, 'elsewhere');
  const reader = await s.token({ scopes: ['read'] });
  const early = await rawRequest(s.port, {
    method: 'POST',
    path: '/acme/bad.git/git-receive-pack',
    headers: { authorization: `Bearer ${reader}`, 'content-type': 'application/x-git-receive-pack-request' },
    declared: { length: 64 * 1024 * 1024, partial: 0 },
  });
  t.equal(early.status, 403, 'answered with none of the body sent');
  t.match(JSON.parse(early.body).error.message, /git:write/);
  const dir = join(git.dir, 'readonly');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'bad', reader), dir]);
  writeFileSync(join(dir, 'b.txt'), 'b\n');
  await git.ok(['add', '.'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'b'], { cwd: dir });
  const push = await git.run(['push', 'origin', 'HEAD:main'], { cwd: dir });
  t.not(push.status, 0);
  t.match(push.stderr, /403/);
  const other = await s.token({ scopes: ['write'], repos: ['acme/elsewhere'] });
  const restricted = await git.run(['push', cloneUrl(s, 'bad', other), 'HEAD:main'], { cwd: dir });
  t.not(restricted.status, 0);
  t.match(restricted.stderr, /403/);
  t.equal((await s.api('GET', '/acme/bad/bookmarks/main')).json.change_id, tip.id);
});

t.test('git push bad input - over REPOHOST_MAX_PUSH_BYTES or the org quota, git prints why and nothing is stored', async (t) => {
  const small = await startTestServer({ env: { REPOHOST_MAX_PUSH_BYTES: String(64 * 1024), REPOHOST_ORG_QUOTA_BYTES: String(256 * 1024) } });
  t.teardown(async () => {
    await small.stop();
    small.cleanup();
  });
  const smallToken = await small.token({ scopes: ['write'] });
  await createRepo(small, 'limited');
  const id = await repoId(small, 'limited');
  const dir = join(git.dir, 'limited');
  await git.ok(['init', '--quiet', '-b', 'main', dir]);
  writeFileSync(join(dir, 'big.bin'), randomBytes(200 * 1024));
  await git.ok(['add', '.'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'big'], { cwd: dir });
  const url = cloneUrl(small, 'limited', smallToken);
  const tooBig = await git.run(['push', url, 'HEAD:main'], { cwd: dir });
  t.not(tooBig.status, 0);
  t.match(tooBig.stderr, /the pack is larger than the limit of 65536 bytes/);
  t.same(stored(small, id), { objects: 0, pending: 0 }, 'nothing stored');

  // Under the pack limit, over the quota: 40 KiB files, until the org is full (on a history without the big file).
  await git.ok(['checkout', '--quiet', '--orphan', 'fill'], { cwd: dir });
  let refusedAt = -1;
  for (let i = 0; i < 10 && refusedAt < 0; i++) {
    writeFileSync(join(dir, 'big.bin'), randomBytes(40 * 1024));
    await git.ok(['add', '.'], { cwd: dir });
    await git.ok(['commit', '--quiet', '-m', `fill ${i}`], { cwd: dir });
    const before = stored(small, id);
    const res = await git.run(['push', '--force', url, 'HEAD:main'], { cwd: dir });
    if (res.status === 0) continue;
    refusedAt = i;
    t.match(res.stderr, /remote unpack failed: the org's storage quota is full/);
    t.same(stored(small, id), before, 'the refused push stored nothing');
  }
  t.ok(refusedAt > 0, `the quota refused push ${refusedAt} after some fit`);
  t.notOk(small.logs.some((l) => /"level":"error"/.test(l)), 'nothing was logged as an error');
});

t.test('git push bad input - after all of it the server still takes a push, and logged no error', async (t) => {
  const dir = join(git.dir, 'after');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'bad', token), dir]);
  writeFileSync(join(dir, 'after.txt'), 'after\n');
  await git.ok(['add', '.'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'after'], { cwd: dir });
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  t.equal((await s.api('GET', '/acme/bad/bookmarks/main')).status, 200);
  t.equal(await git.fsckProblems(dir), null);
  t.notOk(s.logs.some((l) => /"level":"error"/.test(l)), 'nothing was logged as an error');
});
