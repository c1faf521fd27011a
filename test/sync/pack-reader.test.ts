import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { readPack, WHOLE_BLOB_BYTES, type PackLimits } from '../../src/actors/system/sync/pack-reader.js';
import { PULL_PACK_LIMITS } from '../../src/actors/system/sync/upstream-limits.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { BLOB, delta, entryHeader, ofsDelta, pack, refDelta, whole } from '../helpers/pack-builder.js';
import { MemoryPackSink, pieces } from './memory-pack-sink.js';

const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: tmpdir(), GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' };
const git = (cwd: string, args: string[], input?: Buffer | string): Buffer => execFileSync('git', args, { cwd, env, input, maxBuffer: 256 * 1024 * 1024 });

async function read(bytes: Buffer, limits: PackLimits = PULL_PACK_LIMITS, size = 64 * 1024): Promise<MemoryPackSink> {
  const sink = new MemoryPackSink();
  await readPack(pieces(bytes, size), sink, limits);
  return sink;
}

t.test('pack reader - blobs over 1 MiB stream to the receiver in pieces, stored whole and rebuilt from a delta', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-bigpack-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  git(dir, ['init', '--quiet', '-b', 'main']);
  const lines: string[] = [];
  for (let i = 0; i < 60_000; i++) lines.push(`line ${i} ${createHash('sha1').update(String(i)).digest('hex')}`);
  writeFileSync(join(dir, 'big.txt'), lines.join('\n'));
  git(dir, ['add', '-A']);
  git(dir, ['commit', '--quiet', '-m', 'one']);
  lines[30_000] = 'changed in the middle';
  writeFileSync(join(dir, 'big.txt'), lines.join('\n'));
  git(dir, ['commit', '--quiet', '-am', 'two']);
  const oids = git(dir, ['rev-list', '--objects', '--all']).toString().trim().split('\n').map((l) => l.slice(0, 40));
  const bytes = git(dir, ['pack-objects', '--stdout', '--delta-base-offset', '--window=10'], oids.join('\n') + '\n');

  const sink = await read(bytes);
  t.equal(sink.objects.length, oids.length);
  for (const o of sink.objects) t.equal(hashObject(o.type, o.content), o.oid, `${o.type} ${o.oid} hashes to its oid`);
  const big = sink.objects.filter((o) => o.content.length > WHOLE_BLOB_BYTES);
  t.equal(big.length, 2, 'both versions of the file are over 1 MiB');
  t.equal(sink.largePieces.length, 2, 'and both streamed');
  for (const sizes of sink.largePieces) {
    t.ok(sizes.length > 1, `in ${sizes.length} pieces`);
    t.ok(Math.max(...sizes) <= WHOLE_BLOB_BYTES, `none over 1 MiB (largest ${Math.max(...sizes)})`);
  }
  for (const o of big) t.ok(o.content.equals(git(dir, ['cat-file', 'blob', o.oid])), 'content as git has it');

  const idx = mkdtempSync(join(tmpdir(), 'repohost-bigidx-'));
  t.teardown(() => rmSync(idx, { recursive: true, force: true }));
  writeFileSync(join(idx, 'p.pack'), bytes);
  git(idx, ['index-pack', 'p.pack']);
  t.match(git(idx, ['verify-pack', '-v', 'p.idx']).toString(), /chain length = 1/, 'one of them was a delta in the pack');
});

t.test('pack reader - a declared size over the per-object limit is refused before anything is inflated', async (t) => {
  const sink = new MemoryPackSink();
  await t.rejects(readPack(pieces(pack([whole(Buffer.from('x'), 4 * 1024 ** 3)]), 64 * 1024), sink, PULL_PACK_LIMITS), /an object of 4294967296 bytes is over the limit of 536870912 bytes per object/);
  t.equal(sink.objects.length, 0);
  const hello = whole(Buffer.from('hello'));
  await t.rejects(read(pack([hello, ofsDelta(hello.length, delta(5, 5, 'x', 4 * 1024 ** 3))])), /an object of 4294967296 bytes is over the limit/, 'a delta result size too');
});

t.test('pack reader - data inflating past its declared size is refused without being inflated whole', async (t) => {
  // 256 MiB of zeros compress to a quarter of a megabyte.
  const bomb = deflateSync(Buffer.alloc(256 * 1024 * 1024));
  for (const declared of [1024, 2 * WHOLE_BLOB_BYTES]) {
    const bytes = pack([Buffer.concat([entryHeader(BLOB, declared), bomb])]);
    const before = process.memoryUsage().arrayBuffers;
    const sink = new MemoryPackSink();
    await t.rejects(readPack(pieces(bytes, 64 * 1024), sink, PULL_PACK_LIMITS), /inflates to more than its declared size/, `declared ${declared}`);
    t.ok(process.memoryUsage().arrayBuffers - before < 64 * 1024 * 1024, 'nothing near the inflated size was held');
  }
});

t.test('pack reader - data ending before its declared size is refused and its partial blob dropped', async (t) => {
  const sink = new MemoryPackSink();
  await t.rejects(readPack(pieces(pack([whole(Buffer.from('only a few bytes'), 100 * 1024 * 1024)]), 64 * 1024), sink, PULL_PACK_LIMITS), /inflates to less than its declared size/);
  t.equal(sink.aborted, 1);
  await t.rejects(read(pack([whole(Buffer.from('only a few bytes'), 40)])), /inflates to less than its declared size/);
});

t.test('pack reader - a delta whose base comes later in the pack waits for it, with deltas on top of it', async (t) => {
  const base = Buffer.from('the base object, which the pack sends last\n');
  const baseOid = hashObject('blob', base);
  const first = delta(base.length, 9, 'first\n');
  const firstTarget = Buffer.concat([base.subarray(0, 9), Buffer.from('first\n')]);
  const second = delta(firstTarget.length, 4, 'second\n');
  const refEntry = refDelta(baseOid, first);
  const bytes = pack([refEntry, ofsDelta(refEntry.length, second), whole(base)]);
  const sink = await read(bytes, PULL_PACK_LIMITS, 5);
  t.same(
    sink.objects.map((o) => o.content.toString()),
    [base.toString(), firstTarget.toString(), 'the second\n'],
  );
  for (const o of sink.objects) t.equal(hashObject('blob', o.content), o.oid);
  await t.rejects(read(pack([refDelta('ab'.repeat(20), first)])), /1 deltas have a base that is neither in the pack nor already held/);
});

t.test('pack reader - the pack size and object count limits hold', async (t) => {
  const bytes = pack([whole(Buffer.from('a')), whole(Buffer.from('b')), whole(Buffer.from('c'))]);
  await t.rejects(read(bytes, { ...PULL_PACK_LIMITS, maxPackBytes: bytes.length - 1 }), /the pack is larger than the limit/);
  await t.rejects(read(bytes, { ...PULL_PACK_LIMITS, maxObjects: 2 }), /the pack has 3 objects, over the limit of 2/);
  t.equal((await read(bytes, { ...PULL_PACK_LIMITS, maxPackBytes: bytes.length, maxObjects: 3 })).objects.length, 3);
});
