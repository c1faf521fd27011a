import t, { type Test } from 'tap';
import { join } from 'node:path';
import { exportRepo } from '../changes/helpers.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, ROOT, write } from './helpers.js';

/**
 * A full clone keeps what it walked for the next one (git/reachable-sets.ts): a clone of the same
 * branches sends the kept objects, a clone after a branch moved walks only the new commits onto
 * them, and a clone after a branch was rewritten walks everything again. Whatever the path, the
 * clone holds exactly the objects its branches reach, with the oids `repohost export` writes,
 * and `git fsck --strict` is clean. The server says on the progress band how many objects an
 * earlier clone gave.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['read'] });
const git = gitClient(t);

await createRepo(s, 'reuse');
const c1 = await write(s, 'reuse', ROOT, { bookmark: 'main', message: 'c1', files: { 'README.md': '# reuse\n', 'src/a/deep.txt': 'deep\n', 'docs/guide.txt': 'guide\n'.repeat(200) } });
const c2 = await write(s, 'reuse', c1.id, { bookmark: 'main', message: 'c2', files: { 'src/a/deep.txt': 'deeper\n', 'src/b.txt': 'b\n' } });
await write(s, 'reuse', c1.id, { bookmark: 'feature', message: 'on feature', files: { 'src/feature.txt': 'feature\n' } });
let tip = await write(s, 'reuse', c2.id, { bookmark: 'main', message: 'c3', files: { 'docs/guide.txt': 'guide, edited\n' }, deletes: ['README.md'] });

let clones = 0;
/** A bare clone with progress: its directory and what the server said. */
async function clone(): Promise<{ dir: string; enumerated: string }> {
  const dir = join(git.dir, `clone-${++clones}.git`);
  const res = await git.run(['clone', '--bare', '--progress', cloneUrl(s, 'reuse', token), dir]);
  if (res.status !== 0) throw new Error(res.stderr);
  const enumerated = /Enumerating objects: \d+, done[^.\n]*\./.exec(res.stderr.replace(/\r/g, '\n'));
  return { dir, enumerated: enumerated?.[0] ?? '' };
}

const sorted = (out: string): string[] => out.split('\n').map((l) => l.slice(0, 40)).filter(Boolean).sort();

/** The clone holds what its branches reach, nothing else, with the export's oids; fsck is clean. */
async function checkClone(t: Test, dir: string): Promise<number> {
  const x = exportRepo({ s, repo: 'reuse', base: '/acme/reuse' });
  t.teardown(() => x.cleanup());
  const reachable = sorted(await git.ok(['rev-list', '--objects', '--branches'], { cwd: dir }));
  t.same(reachable, sorted(x.git('rev-list', '--objects', '--branches').stdout), 'the objects the export holds for the branches');
  const inPack = /in-pack: (\d+)/.exec(await git.ok(['count-objects', '-v'], { cwd: dir }))?.[1];
  t.equal(Number(inPack), reachable.length, 'the pack holds exactly the reachable objects');
  t.equal(await git.fsckProblems(dir), null, 'git fsck --strict is clean');
  return reachable.length;
}

let firstCount = 0;

t.test('git clone - a later clone of the same branches takes an earlier one\'s objects without a walk', async (t) => {
  const first = await clone();
  firstCount = await checkClone(t, first.dir);
  t.equal(first.enumerated, `Enumerating objects: ${firstCount}, done.`, 'the first clone walks');
  // The first clone may have run before every read thread was up, on another thread than the
  // repository's: by the second, its thread has kept it.
  t.equal(await checkClone(t, (await clone()).dir), firstCount);
  const third = await clone();
  t.equal(third.enumerated, `Enumerating objects: ${firstCount}, done, ${firstCount} known from an earlier clone.`);
  t.equal(await checkClone(t, third.dir), firstCount);
});

t.test('git clone - after a branch moved, a clone walks only the new commit onto the earlier objects', async (t) => {
  tip = await write(s, 'reuse', tip.id, { bookmark: 'main', message: 'c4', files: { 'src/a/deep.txt': 'deepest\n', 'src/new/file.txt': 'new\n' } });
  const moved = await clone();
  const count = await checkClone(t, moved.dir);
  t.ok(count > firstCount, `${count - firstCount} new objects`);
  t.equal(moved.enumerated, `Enumerating objects: ${count}, done, ${firstCount} known from an earlier clone.`);
  t.equal(await git.ok(['rev-parse', 'main'], { cwd: moved.dir }), tip.commit);
});

t.test('git clone - after a branch was rewritten, a clone walks everything and brings nothing of the old history', async (t) => {
  const rewritten = await write(s, 'reuse', c1.id, { bookmark: 'main', message: 'rewritten', files: { 'src/rewritten.txt': 'instead\n' } });
  const first = await clone();
  const count = await checkClone(t, first.dir);
  t.equal(first.enumerated, `Enumerating objects: ${count}, done.`, 'the earlier objects are no base: the old main is not reachable');
  t.equal(await git.ok(['rev-parse', 'main'], { cwd: first.dir }), rewritten.commit);
  const again = await clone();
  t.equal(again.enumerated, `Enumerating objects: ${count}, done, ${count} known from an earlier clone.`, 'the rewritten branches are kept in turn');
  t.notOk((await git.run(['cat-file', '-e', c2.commit], { cwd: again.dir })).status === 0, 'the old main is not in the clone');
});
