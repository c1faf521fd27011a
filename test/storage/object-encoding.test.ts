import t from 'tap';
import { openStorage } from '../../src/storage/database.js';
import { deflateRawSync, inflateSync } from 'node:zlib';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { DEFLATED_BLOB, ZLIB_BLOB, LmdbObjectStore, decodeObjectValue, encodeInlineObject, storedObjectSize } from '../../src/storage/git-object-store.js';
import { K } from '../../src/storage/keys.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { exportRepo, startWithRepo } from '../changes/helpers.js';
import { ROOT, noise, storedState } from './storage-helpers.js';

/**
 * How git objects are stored: text blobs of 1–64 KiB compressed as zlib streams (so a 2 KiB source
 * file fits in its LMDB leaf instead of taking a page of its own, and git's upload-pack sends the
 * stream as it is), everything else as is; both read back byte-identical through the API and the
 * export, and values written in older forms (as is, raw deflate) still read.
 */
const text = (n: number, seed: string): Buffer => {
  const line = `${seed}: the quick brown fox jumps over the lazy dog 0123456789\n`;
  return Buffer.from(line.repeat(Math.ceil(n / line.length)).slice(0, n));
};

t.test('a text blob is stored deflated and reads back byte-identical through the API and the export; random bytes and large blobs are stored as they are', async (t) => {
  const f = await startWithRepo(t, 'enc');
  const files = {
    'small.txt': text(2048, 'small'),
    'tiny.txt': text(100, 'tiny'),
    'noise.bin': noise(2048),
    'large.txt': text(100 * 1024, 'large'),
  };
  const res = await f.s.api('POST', `${f.base}/apply-ops`, {
    body: {
      base_change_id: ROOT,
      ops: Object.entries(files).map(([path, bytes]) => ({ op: 'write', path, content: bytes.toString('base64'), encoding: 'base64' })),
      bookmarks: [{ name: 'main' }],
    },
  });
  t.equal(res.status, 201, res.text);
  for (const [path, bytes] of Object.entries(files)) {
    const got = await fetch(`${f.s.url}/v1${f.base}/content?path=${path}`, { headers: { authorization: `Bearer ${await f.s.token()}`, accept: 'application/octet-stream' } });
    t.equal(got.status, 200, path);
    t.ok(Buffer.from(await got.arrayBuffer()).equals(bytes), `${path} reads back byte-identical`);
  }

  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null, 'git fsck --strict is clean');
  t.equal(x.git('show', 'main:small.txt').stdout, files['small.txt'].toString(), 'git reads the deflated blob');

  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  await f.s.stop();
  const storage = openStorage(f.s.dataDir);
  t.teardown(() => storage.close());
  const stored = (bytes: Buffer): Buffer => storage.objects.get(K.object(repoId, hashObject('blob', bytes)))!;
  const small = stored(files['small.txt']);
  t.equal(small[0], ZLIB_BLOB, 'the 2 KiB text blob is compressed');
  t.ok(small.length < 200, `and takes ${small.length} bytes for 2,048`);
  t.ok(inflateSync(small.subarray(5)).equals(files['small.txt']), 'as a zlib stream of its content');
  t.equal(storedObjectSize(small), 2048, 'its size is known without inflating');
  t.equal(stored(files['tiny.txt'])[0], 3, 'a blob under 1 KiB is stored as is');
  t.equal(stored(files['noise.bin'])[0], 3, 'random bytes, which do not compress, are stored as is');
  t.equal(stored(files['large.txt']).length, 100 * 1024 + 1, 'a blob over 64 KiB is stored as is');
});

t.test('a compressed blob counts its content size against the quota, once however many writes name it; a file named by its oid finds it', async (t) => {
  const f = await startWithRepo(t, 'count');
  const content = text(20 * 1024, 'counted');
  const oid = hashObject('blob', content);
  const first = await f.s.api('POST', `${f.base}/apply-ops`, {
    body: { base_change_id: ROOT, ops: [{ op: 'write', path: 'a.txt', content: content.toString() }, { op: 'write', path: 'b.txt', content: content.toString('base64'), encoding: 'base64' }] },
  });
  t.equal(first.status, 201, first.text);
  // PATCH /changes takes `files` (base64 always): the same content a third time.
  const again = await f.s.api('PATCH', `${f.base}/changes/${first.json.change.id}`, { body: { files: [{ path: 'c.txt', content: content.toString('base64') }] } });
  t.equal(again.status, 200, again.text);
  const named = await f.s.api('POST', `${f.base}/apply-ops`, { body: { change_id: first.json.change.id, ops: [{ op: 'write', path: 'd.txt', blob_oid: oid }] } });
  t.equal(named.status, 200, `the blob is stored under its git oid: ${named.text}`);

  const orgId = (await f.s.api('GET', `/${f.s.org}`)).json.id as string;
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  await f.s.stop();
  const state = storedState(f.s.dataDir, orgId, repoId);
  t.ok(state.repoBytes! >= content.length, `the repository counts ${state.repoBytes} bytes: the content's ${content.length}, not its compressed size`);
  t.ok(state.repoBytes! < 2 * content.length, 'and counts it once');
  const storage = openStorage(f.s.dataDir);
  t.teardown(() => storage.close());
  t.equal(storage.objects.get(K.object(repoId, oid))![0], ZLIB_BLOB, 'stored compressed');
});

t.test('an object stored before compression existed (type byte, then the content) still reads', async (t) => {
  const f = await startWithRepo(t, 'old');
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  await f.s.stop();
  const content = text(4096, 'old');
  const oid = hashObject('blob', content);
  const raw = Buffer.concat([Buffer.from([3]), content]);
  t.not(encodeInlineObject('blob', content)[0], 3, 'today the same content would be deflated');
  const storage = openStorage(f.s.dataDir);
  t.teardown(() => storage.close());
  await storage.objects.put(K.object(repoId, oid), raw);
  const info = decodeObjectValue(oid, storage.objects.get(K.object(repoId, oid))!);
  t.equal(info.size, 4096);
  t.ok(Buffer.from(info.content!).equals(content), 'decoded byte-identical');
  const store = new LmdbObjectStore(storage, repoId);
  t.ok(Buffer.from(store.read(oid)!.content).equals(content), 'and through the object store');
});

t.test('a blob stored as raw deflate (before zlib streams) reads back through the API, the export and a git clone', async (t) => {
  const f = await startWithRepo(t, 'legacy');
  const content = text(3000, 'legacy');
  const written = await f.s.api('POST', `${f.base}/apply-ops`, { body: { base_change_id: ROOT, ops: [{ op: 'write', path: 'old.txt', content: content.toString() }], bookmarks: [{ name: 'main' }] } });
  t.equal(written.status, 201, written.text);
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  const oid = hashObject('blob', content);
  await f.s.stop();
  const storage = openStorage(f.s.dataDir);
  const raw = deflateRawSync(content);
  const legacy = Buffer.allocUnsafe(raw.length + 5);
  legacy[0] = DEFLATED_BLOB;
  legacy.writeUInt32LE(content.length, 1);
  raw.copy(legacy, 5);
  await storage.objects.put(K.object(repoId, oid), legacy);
  await storage.close();
  await f.s.restart();

  const got = await fetch(`${f.s.url}/v1${f.base}/content?path=old.txt`, { headers: { authorization: `Bearer ${await f.s.token()}`, accept: 'application/octet-stream' } });
  t.ok(Buffer.from(await got.arrayBuffer()).equals(content), 'the API reads it');
  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.git('show', 'main:old.txt').stdout, content.toString(), 'the export writes it');
  const dir = mkdtempSync(join(tmpdir(), 'repohost-legacy-clone-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: dir, GIT_TERMINAL_PROMPT: '0' };
  const clone = spawnSync('git', ['clone', '--quiet', `http://x:${await f.s.token()}@127.0.0.1:${f.s.port}${f.base}.git`, join(dir, 'c')], { env, encoding: 'utf8' });
  t.equal(clone.status, 0, clone.stderr);
  t.equal(spawnSync('git', ['show', 'main:old.txt'], { cwd: join(dir, 'c'), env, encoding: 'utf8' }).stdout, content.toString(), 'a clone gets it, framed as a zlib stream');
  t.equal(spawnSync('git', ['fsck', '--strict'], { cwd: join(dir, 'c'), env, encoding: 'utf8' }).status, 0);
});

t.test('every write tells the observer whether it stored the object or met it, once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-object-observer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const storage = openStorage(dir);
  t.teardown(() => storage.close());
  const repoId = 'O'.repeat(26);
  const seen: string[] = [];
  const observer = { stored: (oid: string, size: number) => void seen.push(`stored ${oid.slice(0, 7)} ${size}`), existing: (oid: string) => void seen.push(`existing ${oid.slice(0, 7)}`) };
  const tree = Buffer.from('100644 a\0' + '\x01'.repeat(20), 'latin1');
  const blob = text(2048, 'observed');
  const blobOid = hashObject('blob', blob);
  const treeOid = hashObject('tree', tree);
  const write = (fn: (store: LmdbObjectStore) => void): void => storage.root.transactionSync(() => fn(new LmdbObjectStore(storage, repoId, { observer })));
  write((store) => {
    store.write('tree', tree);
    store.write('tree', tree); // met in this store's own cache
    store.writeEncoded(blobOid, encodeInlineObject('blob', blob));
  });
  // New stores: the objects are met in LMDB, not in a cache.
  write((store) => store.write('tree', tree));
  write((store) => store.writeEncoded(blobOid, encodeInlineObject('blob', blob)));
  write((store) => store.write('blob', blob));
  t.same(seen, [
    `stored ${treeOid.slice(0, 7)} ${tree.length}`,
    `existing ${treeOid.slice(0, 7)}`,
    `stored ${blobOid.slice(0, 7)} 2048`,
    `existing ${treeOid.slice(0, 7)}`,
    `existing ${blobOid.slice(0, 7)}`,
    `existing ${blobOid.slice(0, 7)}`,
  ]);
});
