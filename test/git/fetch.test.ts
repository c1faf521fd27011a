import t from 'tap';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, nextSecond, packObjects, postUploadPack, protocol, PROTOCOLS, ROOT, sideBandPack, v2Request, write } from './helpers.js';

/**
 * `git fetch` after a clone (API §14): incremental fetches of what the API wrote, shallow clones
 * cut by date or by a ref, deepening and unshallowing, and wants of objects no ref advertises.
 * History: c0 … c4 on `main`, c3 committed in a later second than c2 (the API's committer time
 * is the server's clock); `old` at c2.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['read'] });
const git = gitClient(t);

await createRepo(s, 'hist');
const commits: Array<{ id: string; commit: string; time: number }> = [];
let base = ROOT;
for (let i = 0; i < 5; i++) {
  if (i === 3) await nextSecond(commits[2]!.time);
  const c = await write(s, 'hist', base, { bookmark: 'main', message: `c${i}`, files: { [`f${i}.txt`]: `file ${i}\n`, 'a/b/c.txt': `version ${i}\n` } });
  commits.push(c);
  base = c.id;
}
const old = await s.api('POST', '/acme/hist/bookmarks', { body: { name: 'old', change_id: commits[2]!.id } });
if (old.status !== 201) throw new Error(old.text);
const oids = commits.map((c) => c.commit);
const shallowFile = (dir: string): string[] => (existsSync(join(dir, '.git', 'shallow')) ? readFileSync(join(dir, '.git', 'shallow'), 'utf8').trim().split('\n').sort() : []);

t.test('git fetch - after an API write, a fetch brings the new commit and only the objects that changed', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `incremental-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', cloneUrl(s, 'hist', token), dir]);
    const next = await write(s, 'hist', base, { bookmark: 'main', message: `after clone v${v}`, files: { 'a/b/c.txt': `changed for v${v}\n` } });
    base = next.id;
    const res = await git.run([...protocol(v), 'fetch', 'origin'], { cwd: dir });
    t.equal(res.status, 0, res.stderr);
    t.equal(await git.ok(['rev-parse', 'origin/main'], { cwd: dir }), next.commit, `v${v}: origin/main moved to the new commit`);
    t.equal(await git.ok(['show', 'origin/main:a/b/c.txt'], { cwd: dir }), `changed for v${v}`);
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git fetch - a one-file change sends its commit, the trees on its path and its blob, nothing more', async (t) => {
  const dir = join(git.dir, 'counted');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'hist', token), dir]);
  const next = await write(s, 'hist', base, { bookmark: 'main', message: 'one file', files: { 'a/b/c.txt': 'one more\n' } });
  base = next.id;
  const res = await git.run(['fetch', '--progress', 'origin'], { cwd: dir });
  t.equal(res.status, 0, res.stderr);
  t.match(res.stderr, /Total 5 \(delta 0\)/, 'the commit, the root tree, a/, a/b/ and the blob of a/b/c.txt');
  t.equal(await git.ok(['rev-parse', 'origin/main'], { cwd: dir }), next.commit);
});

t.test('git clone - --shallow-since keeps the commits newer than the date, the oldest of them shallow', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `since-v${v}`);
    // c3's second: c2 is older, everything after c2 is at least this new.
    await git.ok([...protocol(v), 'clone', '--quiet', '--single-branch', `--shallow-since=${commits[3]!.time}`, cloneUrl(s, 'hist', token), dir]);
    const log = (await git.ok(['log', '--format=%s'], { cwd: dir })).split('\n');
    t.same(log.slice(-2), ['c4', 'c3'], `v${v}: c3 and c4 are there, c2 is not`);
    t.notOk(log.includes('c2'));
    t.same(shallowFile(dir), [oids[3]], 'c3 is the shallow boundary');
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git clone - --shallow-exclude leaves out the history of the named branch', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `exclude-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', '--single-branch', '--branch', 'main', '--shallow-exclude=old', cloneUrl(s, 'hist', token), dir]);
    const log = (await git.ok(['log', '--format=%s', oids[4]!], { cwd: dir })).split('\n');
    t.same(log, ['c4', 'c3'], `v${v}: what old reaches (c2 and before) is left out`);
    t.same(shallowFile(dir), [oids[3]]);
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git fetch - --deepen extends a shallow clone and --unshallow completes it', async (t) => {
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `deepen-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', '--depth', '1', '--single-branch', cloneUrl(s, 'hist', token), dir]);
    const tip = await git.ok(['rev-parse', 'HEAD'], { cwd: dir });
    t.equal(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir }), '1');
    await git.ok([...protocol(v), 'fetch', '--quiet', '--deepen', '2'], { cwd: dir });
    t.equal(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir }), '3', `v${v}: two more commits`);
    t.same(shallowFile(dir), [await git.ok(['rev-parse', `${tip}~2`], { cwd: dir })], 'the boundary moved two commits down');
    t.equal(await git.fsckProblems(dir), null);
    await git.ok([...protocol(v), 'fetch', '--quiet', '--unshallow'], { cwd: dir });
    t.same(shallowFile(dir), [], `v${v}: no longer shallow`);
    t.equal(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir }), String(Number(await git.ok(['rev-list', '--count', tip], { cwd: dir }))));
    t.ok(Number(await git.ok(['rev-list', '--count', 'HEAD'], { cwd: dir })) >= 5, 'the whole history is there');
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git fetch - an object no ref advertises (an evolved change\'s earlier commit) can be fetched by its oid', async (t) => {
  const first = await write(s, 'hist', base, { message: 'first version', files: { 'evolving.txt': 'one\n' } });
  const evolved = await s.api('POST', '/acme/hist/apply-ops', { body: { change_id: first.id, message: 'second version', ops: [{ op: 'write', path: 'evolving.txt', content: 'two\n' }] } });
  t.equal(evolved.status, 200, evolved.text);
  t.not(evolved.json.change.current_commit_oid, first.commit);
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `by-oid-v${v}`);
    await git.ok(['init', '--quiet', dir]);
    await git.ok([...protocol(v), 'fetch', '--quiet', cloneUrl(s, 'hist', token), first.commit], { cwd: dir });
    t.equal(await git.ok(['cat-file', '-t', first.commit], { cwd: dir }), 'commit', `v${v}: the earlier commit arrived`);
    t.equal(await git.ok(['show', `${first.commit}:evolving.txt`], { cwd: dir }), 'one');
  }
});

t.test('git fetch - a want of a blob is answered with the blob whatever the filter', async (t) => {
  const blob = (await git.ok(['hash-object', '--stdin'], { input: 'version 4\n' }));
  const res = await postUploadPack(s, 'hist', token, v2Request('fetch', [`want ${blob}`, 'filter blob:none', 'no-progress', 'done']));
  t.equal(res.status, 200);
  const objects = await packObjects(git, sideBandPack(res.body));
  t.same([...objects], [[blob, 'blob']]);
});

t.test('git fetch - negotiation: a have that bounds the want gets ready and the pack in one round (v2)', async (t) => {
  const res = await postUploadPack(s, 'hist', token, v2Request('fetch', [`want ${oids[4]}`, `have ${oids[3]}`, 'no-progress']));
  t.equal(res.status, 200);
  const text = res.body.toString('latin1');
  t.match(text, `ACK ${oids[3]}\n`);
  t.match(text, 'ready\n');
  const objects = await packObjects(git, sideBandPack(res.body));
  t.ok(objects.has(oids[4]!), 'the wanted commit is in the pack');
  t.notOk(objects.has(oids[3]!), 'the common one is not');

  const unknown = 'f'.repeat(40);
  const round = await postUploadPack(s, 'hist', token, v2Request('fetch', [`want ${oids[4]}`, `have ${unknown}`, 'no-progress']));
  t.same(round.body.toString('latin1'), '0014acknowledgments\n0008NAK\n0000', 'nothing in common: NAK and the end of the round');
});
