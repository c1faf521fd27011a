import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hashObject } from '../../src/vcs/git-object.js';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, protocol, PROTOCOLS, ROOT, write } from './helpers.js';

/**
 * `git clone` against the server (API §14): full, shallow, partial and mirror clones, in protocol
 * v2 and v0, each checked out and `git fsck --strict`-clean. The history has nested directories,
 * a text file stored compressed, one over 64 KiB stored as is, random bytes, an executable and a
 * second bookmark.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['read'] });
const git = gitClient(t);

const deflatable = 'the quick brown fox jumps over the lazy dog\n'.repeat(60);
const large = Buffer.from('0123456789abcdef\n'.repeat(8000));
const noise = randomBytes(3000);
// Incompressible and 64 KiB: sent as two stored deflate blocks (one holds at most 65,535 bytes).
const noise64k = randomBytes(64 * 1024);
await createRepo(s, 'demo');
const c1 = await write(s, 'demo', ROOT, { bookmark: 'main', message: 'first', files: { 'README.md': '# demo\n', 'src/lib/deep/a.txt': 'a\n', 'docs/text.txt': deflatable } });
const c2 = await write(s, 'demo', c1.id, { bookmark: 'main', message: 'second', files: { 'assets/large.txt': large, 'assets/noise.bin': noise, 'assets/noise64k.bin': noise64k } });
const feature = await write(s, 'demo', c2.id, { bookmark: 'feature', message: 'on feature', files: { 'src/feature.txt': 'feature\n' } });
const c3 = await write(s, 'demo', c2.id, { bookmark: 'main', message: 'third', files: { 'src/lib/deep/a.txt': 'a, changed\n' }, deletes: ['README.md'] });
const script = await s.api('POST', '/acme/demo/apply-ops', {
  body: { base_change_id: c3.id, message: 'script', ops: [{ op: 'write', path: 'run.sh', content: '#!/bin/sh\necho hi\n', mode: '100755' }], bookmarks: [{ name: 'main' }] },
});
if (script.status !== 201) throw new Error(script.text);
const head = script.json.change.current_commit_oid as string;

t.test('git clone - a full clone checks out the default bookmark with every bookmark as a branch; fsck is clean', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `full-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', cloneUrl(s, 'demo', token), dir]);
    t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), head, `v${v}: HEAD is the default bookmark's commit`);
    t.equal(await git.ok(['symbolic-ref', 'HEAD'], { cwd: dir }), 'refs/heads/main');
    t.equal(await git.ok(['rev-parse', 'origin/feature'], { cwd: dir }), feature.commit, 'the other bookmark is a remote branch');
    t.equal(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir }), '4');
    t.equal(readFileSync(join(dir, 'docs/text.txt'), 'utf8'), deflatable, 'a file stored deflated reads back');
    t.ok(readFileSync(join(dir, 'assets/large.txt')).equals(large), 'a file over 64 KiB reads back');
    t.ok(readFileSync(join(dir, 'assets/noise.bin')).equals(noise), 'random bytes read back');
    t.ok(readFileSync(join(dir, 'assets/noise64k.bin')).equals(noise64k), '64 KiB of random bytes read back');
    t.equal(readFileSync(join(dir, 'src/lib/deep/a.txt'), 'utf8'), 'a, changed\n');
    t.equal(statSync(join(dir, 'run.sh')).mode & 0o111, 0o111, 'the executable bit is kept');
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git clone - the URL without .git serves the same repository', async (t) => {
  const dir = join(git.dir, 'no-suffix');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'demo', token, ''), dir]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), head);
});

t.test('git clone - --depth 1 brings the tip only, marked shallow; fsck is clean', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `depth-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', '--depth', '1', '--no-single-branch', cloneUrl(s, 'demo', token), dir]);
    t.equal(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir }), '1', `v${v}: one commit`);
    t.same((await git.ok(['rev-parse', '--shallow-file'], { cwd: dir })).length > 0, true);
    const shallow = readFileSync(join(dir, '.git', 'shallow'), 'utf8').trim().split('\n').sort();
    t.same(shallow, [head, feature.commit].sort(), 'both branch tips are the shallow boundary');
    t.ok(readFileSync(join(dir, 'assets/large.txt')).equals(large), 'the checkout is complete');
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git clone - --filter=blob:none leaves the blobs out and fetches them on checkout', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `blobless-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', '--no-checkout', '--filter=blob:none', cloneUrl(s, 'demo', token), dir]);
    const missing = (await git.ok(['rev-list', '--objects', '--all', '--missing=print'], { cwd: dir })).split('\n').filter((l) => l.startsWith('?'));
    t.ok(missing.length >= 7, `v${v}: the clone lacks the blobs (${missing.length} missing)`);
    await git.ok([...protocol(v), 'checkout', '--quiet', 'main'], { cwd: dir });
    t.ok(readFileSync(join(dir, 'assets/large.txt')).equals(large), 'checkout fetched what it needed');
    t.equal(readFileSync(join(dir, 'docs/text.txt'), 'utf8'), deflatable);
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git clone - blob:limit leaves out only the large blobs; tree:0 leaves out every tree', async (t) => {
  const limited = join(git.dir, 'blob-limit');
  await git.ok(['clone', '--quiet', '--no-checkout', '--filter=blob:limit=4k', cloneUrl(s, 'demo', token), limited]);
  const missing = (await git.ok(['rev-list', '--objects', '--all', '--missing=print'], { cwd: limited })).split('\n').filter((l) => l.startsWith('?'));
  t.same(missing.sort(), [`?${hashObject('blob', large)}`, `?${hashObject('blob', noise64k)}`].sort(), 'only the blobs over 4 KiB are missing');

  const treeless = join(git.dir, 'tree-0');
  await git.ok(['clone', '--quiet', '--no-checkout', '--filter=tree:0', cloneUrl(s, 'demo', token), treeless]);
  const rootTree = await git.ok(['rev-parse', `${head}^{tree}`], { cwd: join(git.dir, 'full-v2') });
  const listed = await git.ok(['rev-list', '--objects', '--missing=print', 'HEAD'], { cwd: treeless });
  t.match(listed, `?${rootTree}`, 'the root tree of the tip is missing');
  await git.ok(['checkout', '--quiet', 'main'], { cwd: treeless });
  t.equal(readFileSync(join(treeless, 'src/lib/deep/a.txt'), 'utf8'), 'a, changed\n', 'checkout fetched the trees and blobs');
  t.equal(await git.fsckProblems(treeless), null);
});

t.test('git clone - --mirror copies every branch; fsck is clean', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `mirror-v${v}.git`);
    await git.ok([...protocol(v), 'clone', '--quiet', '--mirror', cloneUrl(s, 'demo', token), dir]);
    const refs = await git.ok(['for-each-ref', '--format=%(refname) %(objectname)'], { cwd: dir });
    t.same(refs.split('\n').sort(), [`refs/heads/feature ${feature.commit}`, `refs/heads/main ${head}`], `v${v}: the branches, and nothing else`);
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git clone - an empty repository clones as empty, HEAD unborn on the default bookmark', async (t) => {
  await createRepo(s, 'empty');
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `empty-v${v}`);
    const res = await git.run([...protocol(v), 'clone', cloneUrl(s, 'empty', token), dir]);
    t.equal(res.status, 0, res.stderr);
    t.match(res.stderr, /cloned an empty repository/);
    t.equal(await git.ok(['rev-list', '--all', '--count'], { cwd: dir }), '0');
  }
});
