import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writePack } from '../../src/actors/system/sync/pack-writer.js';
import { readPack, type PackObject } from '../../src/actors/system/sync/pack-reader.js';
import { DeltaApplier } from '../../src/actors/system/sync/pack-delta.js';
import { PULL_PACK_LIMITS } from '../../src/actors/system/sync/upstream-limits.js';
import { MemoryPackSink, pieces } from './memory-pack-sink.js';
import { hashObject } from '../../src/vcs/git-object.js';
import type { ObjectType } from '../../src/vcs/object-store.js';

const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: tmpdir(), GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' };
const git = (cwd: string, args: string[], input?: Buffer | string): Buffer => execFileSync('git', args, { cwd, env, input, maxBuffer: 256 * 1024 * 1024 });

/** A repository whose files change a little in every commit, so git stores deltas. */
function makeDeltaRepo(): { dir: string; oids: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-pack-'));
  git(dir, ['init', '--quiet', '-b', 'main']);
  let text = '';
  for (let i = 0; i < 40; i++) text += `line ${i} ${'x'.repeat(i % 7)} of a file that grows slowly\n`;
  for (let c = 0; c < 12; c++) {
    text = text.replace(`line ${c * 3} `, `line ${c * 3} (edited ${c}) `) + `appended ${c}\n`;
    writeFileSync(join(dir, 'big.txt'), text);
    writeFileSync(join(dir, `small-${c % 3}.txt`), `small ${c}\n`);
    git(dir, ['add', '-A']);
    git(dir, ['commit', '--quiet', '-m', `commit ${c}`]);
  }
  const oids = git(dir, ['rev-list', '--objects', '--all']).toString().trim().split('\n').map((l) => l.slice(0, 40));
  return { dir, oids };
}

/** Every object of `pack` as the reader hands them out, the pack arriving in `size`-byte pieces. */
async function readAll(pack: Buffer, held?: Map<string, { type: ObjectType; content: Buffer }>, size = 64 * 1024): Promise<PackObject[]> {
  const sink = new MemoryPackSink(held);
  await readPack(pieces(pack, size), sink, PULL_PACK_LIMITS);
  return sink.objects;
}

let repo: { dir: string; oids: string[] };
t.before(() => {
  repo = makeDeltaRepo();
});
t.teardown(() => rmSync(repo.dir, { recursive: true, force: true }));

/** Every object's type and content in one `git cat-file --batch` run. */
function catFiles(dir: string, oids: readonly string[]): Map<string, { type: ObjectType; content: Buffer }> {
  const out = git(dir, ['cat-file', '--batch'], oids.join('\n') + '\n');
  const objects = new Map<string, { type: ObjectType; content: Buffer }>();
  let pos = 0;
  while (pos < out.length) {
    const eol = out.indexOf(10, pos);
    const [oid, type, size] = out.toString('latin1', pos, eol).split(' ');
    const content = out.subarray(eol + 1, eol + 1 + Number(size));
    objects.set(oid!, { type: type as ObjectType, content });
    pos = eol + 1 + Number(size) + 1;
  }
  return objects;
}

for (const [label, args, size] of [
  ['OFS deltas', ['--delta-base-offset'], 64 * 1024],
  ['REF deltas', [], 64 * 1024],
  ['OFS deltas arriving a few bytes at a time', ['--delta-base-offset'], 7],
] as const) {
  t.test(`packfile - a git pack with ${label} reads back object for object`, async (t) => {
    const { dir, oids } = repo;
    const pack = git(dir, ['pack-objects', '--stdout', '--window=10', '--depth=5', '--no-reuse-delta', ...args], oids.join('\n') + '\n');
    const objects = await readAll(pack, undefined, size);
    t.equal(objects.length, oids.length);
    t.same(new Set(objects.map((o) => o.oid)), new Set(oids));
    const stored = catFiles(dir, oids);
    for (const o of objects) {
      const expected = stored.get(o.oid)!;
      if (o.type !== expected.type || !o.content.equals(expected.content) || hashObject(o.type, o.content) !== o.oid) {
        t.fail(`object ${o.oid} differs`);
        return;
      }
    }
    // The pack really used deltas (otherwise this test would prove nothing about them).
    const idx = mkdtempSync(join(tmpdir(), 'repohost-idx-'));
    t.teardown(() => rmSync(idx, { recursive: true, force: true }));
    writeFileSync(join(idx, 'p.pack'), pack);
    git(idx, ['index-pack', 'p.pack']);
    const verbose = git(idx, ['verify-pack', '-v', 'p.idx']).toString();
    t.match(verbose, /chain length = [1-9]/, 'the pack contains delta chains');
  });
}

t.test('packfile - a thin pack resolves REF deltas against objects we already hold', async (t) => {
  const { dir } = repo;
  const head = git(dir, ['rev-parse', 'HEAD']).toString().trim();
  const parent = git(dir, ['rev-parse', 'HEAD~1']).toString().trim();
  // Objects of the last commit only, deltified against the parent's objects (not included).
  const pack = git(dir, ['pack-objects', '--stdout', '--thin', '--revs'], `${head}\n^${parent}\n`);
  const held = catFiles(dir, git(dir, ['rev-list', '--objects', parent]).toString().trim().split('\n').map((l) => l.slice(0, 40)));
  const objects = await readAll(pack, held);
  t.ok(objects.some((o) => o.oid === head));
  for (const o of objects) t.equal(hashObject(o.type, o.content), o.oid);
  await t.rejects(readAll(pack), /neither in the pack nor already held/, 'without the bases it is refused');
});

t.test('packfile - a corrupt pack is refused with a clear error', async (t) => {
  const { dir, oids } = repo;
  const pack = git(dir, ['pack-objects', '--stdout'], oids.join('\n') + '\n');
  const flipped = Buffer.from(pack);
  flipped[flipped.length - 1] = flipped[flipped.length - 1]! ^ 0xff;
  await t.rejects(readAll(flipped), /checksum does not match/);
  const damaged = Buffer.from(pack);
  damaged[40] = damaged[40]! ^ 0xff;
  await t.rejects(readAll(damaged), /corrupt|checksum|malformed|type/);
  await t.rejects(readAll(Buffer.from('not a pack at all, definitely not a pack')), /not a packfile/);
  await t.rejects(readAll(pack.subarray(0, pack.length - 30)), /truncated/);
  await t.rejects(readAll(Buffer.concat([pack, Buffer.from('tail')])), /data follows the pack checksum/);
  const applier = new DeltaApplier({ size: 3, read: () => Buffer.from('abc') }, () => ({ write() {} }));
  await t.rejects(applier.push(Buffer.from([5, 1, 0x41])), /base size mismatch/);
});

t.test('packfile - packs we write are accepted by git', async (t) => {
  const { dir, oids } = repo;
  const stored = catFiles(dir, oids);
  const objects = oids.map((oid) => stored.get(oid)!);
  const pack = writePack(objects);
  const target = mkdtempSync(join(tmpdir(), 'repohost-unpack-'));
  t.teardown(() => rmSync(target, { recursive: true, force: true }));
  git(target, ['init', '--quiet', '--bare']);
  git(target, ['unpack-objects', '--strict'], pack);
  git(target, ['update-ref', 'refs/heads/main', git(dir, ['rev-parse', 'HEAD']).toString().trim()]);
  t.equal(git(target, ['fsck', '--strict', '--no-progress']).toString(), '');
  t.same((await readAll(pack)).map((o) => o.oid).sort(), [...oids].sort());
});
