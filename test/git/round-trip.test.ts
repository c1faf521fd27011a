import t from 'tap';
import { join } from 'node:path';
import { exportRepo } from '../changes/helpers.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, ROOT, write } from './helpers.js';

/**
 * What git gets over HTTP is what the repository holds (API §14): every object of a clone has
 * the oid `repohost export` writes for it, and a conflicted change's commit arrives in jj's raw
 * layout (`jj:trees` header, `.jjconflict-*` subtrees, `JJ-CONFLICT-README`), as export keeps it.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['read'] });
const git = gitClient(t);

await createRepo(s, 'trip');
const base = await write(s, 'trip', ROOT, { bookmark: 'main', message: 'base', files: { 'a.txt': '1\n2\n3\n', 'dir/b.txt': 'b\n' } });
const main = await write(s, 'trip', base.id, { bookmark: 'main', message: 'on main', files: { 'a.txt': '1\nmain\n3\n' } });
const feat = await write(s, 'trip', base.id, { bookmark: 'feat', message: 'on feat', files: { 'a.txt': '1\nfeat\n3\n', 'dir/c.txt': 'c\n' } });
const merged = await s.api('POST', '/acme/trip/bookmarks/merge', { body: { target: 'main', source: 'feat', allow_conflicted: true } });
if (merged.status !== 200 || merged.json.is_conflicted !== true) throw new Error(`merge: ${merged.status} ${merged.text}`);
const conflicted = merged.json.commit_oid as string;

t.test('git round trip - the conflicted merge is served in jj layout', async (t) => {
  const dir = join(git.dir, 'conflict');
  await git.ok(['clone', '--quiet', '--no-checkout', cloneUrl(s, 'trip', token), dir]);
  t.equal(await git.ok(['rev-parse', 'origin/main'], { cwd: dir }), conflicted);
  const commit = await git.ok(['cat-file', '-p', conflicted], { cwd: dir });
  t.match(commit, /\njj:trees [0-9a-f]{40}( [0-9a-f]{40}){2}\n/, 'the commit carries jj:trees');
  t.match(commit, new RegExp(`\nparent ${main.commit}\nparent ${feat.commit}\n`), 'both parents');
  const root = (await git.ok(['ls-tree', '--name-only', conflicted], { cwd: dir })).split('\n');
  t.ok(root.includes('JJ-CONFLICT-README'), 'the README is in the root tree');
  t.ok(root.some((n) => n.startsWith('.jjconflict-base-')) && root.some((n) => n.startsWith('.jjconflict-side-')), 'with the conflict subtrees');
  t.equal(await git.ok(['show', `${conflicted}:a.txt`], { cwd: dir }), '1\nmain\n3', 'the root tree is the first side, without markers');
  t.equal(await git.fsckProblems(dir), null, 'git fsck --strict is clean');
});

t.test('git round trip - API writes, clone and export agree on every oid', async (t) => {
  const after = await write(s, 'trip', merged.json.change_id as string, { bookmark: 'main', message: 'after the merge', files: { 'dir/d.txt': 'd\n' } });
  const dir = join(git.dir, 'mirror.git');
  await git.ok(['clone', '--quiet', '--mirror', cloneUrl(s, 'trip', token), dir]);
  const x = exportRepo({ s, repo: 'trip', base: '/acme/trip' });
  t.teardown(() => x.cleanup());
  const listRefs = (out: string): string[] => out.split('\n').filter((l) => /refs\/(heads|tags|notes)\//.test(l)).sort();
  const exported = x.git('for-each-ref', '--format=%(objectname) %(refname)');
  t.same(listRefs(await git.ok(['for-each-ref', '--format=%(objectname) %(refname)'], { cwd: dir })), listRefs(exported.stdout), 'the same branches at the same commits');
  t.match(exported.stdout, `${after.commit} refs/heads/main`);
  const objects = (out: string): string[] => out.split('\n').map((l) => l.slice(0, 40)).filter(Boolean).sort();
  const cloned = objects(await git.ok(['rev-list', '--objects', '--branches'], { cwd: dir }));
  const fromExport = objects(x.git('rev-list', '--objects', '--branches').stdout);
  t.ok(cloned.length > 10, `${cloned.length} objects`);
  t.same(cloned, fromExport, 'every object reachable from the branches has the same oid in both');
  t.equal(await git.fsckProblems(dir), null);
  t.equal(x.fsckProblems(), null);
});
