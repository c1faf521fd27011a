import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { exportRepo } from '../changes/helpers.js';
import { serverForFile } from '../helpers/server.js';
import { startEventLog } from '../helpers/webhook-receiver.js';
import { newChangeId } from '../../src/vcs/ids.js';
import { cloneUrl, createRepo, gitClient, hashCommit, pushEvents, responseLines, ROOT, write } from './helpers.js';

/**
 * git push against repohost (API §14), with git's own client: branches created, fast-forwarded,
 * rewritten and deleted, tags, `--atomic`, commits becoming changes through their `change-id`
 * header (and evolving the change they name, its descendants on the server rebased), signed
 * commits kept byte for byte, the `push` event, and the round trip through the API and export.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['write'] });
const git = gitClient(t);
const log = await startEventLog(s);
t.teardown(() => log.close());

async function workTree(repo: string, name: string): Promise<string> {
  const dir = join(git.dir, name);
  await git.ok(['clone', '--quiet', cloneUrl(s, repo, token), dir]);
  return dir;
}

async function commitFiles(dir: string, files: Record<string, string>, message: string): Promise<string> {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  await git.ok(['add', '-A'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', message], { cwd: dir });
  return git.ok(['rev-parse', 'HEAD'], { cwd: dir });
}

/** A tree of the given files, written in the work tree's repository without a commit. */
async function treeOf(dir: string, files: Record<string, string>): Promise<string> {
  await git.ok(['read-tree', '--empty'], { cwd: dir });
  for (const [path, content] of Object.entries(files)) {
    const blob = await git.ok(['hash-object', '-w', '--stdin'], { cwd: dir, input: content });
    await git.ok(['update-index', '--add', '--cacheinfo', `100644,${blob},${path}`], { cwd: dir });
  }
  return git.ok(['write-tree'], { cwd: dir });
}

async function bookmark(repo: string, name: string): Promise<{ status: number; changeId: string; commit: string }> {
  const res = await s.api('GET', `/${s.org}/${repo}/bookmarks/${encodeURIComponent(name)}`);
  if (res.status !== 200) return { status: res.status, changeId: '', commit: '' };
  const change = await s.api('GET', `/${s.org}/${repo}/changes/${res.json.change_id}`);
  return { status: 200, changeId: res.json.change_id, commit: change.json.current_commit_oid };
}

t.test('git push - a new branch, a fast-forward and a second branch: bookmarks and changes follow', async (t) => {
  await createRepo(s, 'flow');
  const dir = await workTree('flow', 'flow');
  const first = await commitFiles(dir, { 'a.txt': 'a\n', 'dir/b.txt': 'b\n' }, 'first');
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  const main1 = await bookmark('flow', 'main');
  t.equal(main1.commit, first, 'the bookmark shows the pushed commit');
  const change1 = await s.api('GET', `/${s.org}/flow/changes/${main1.changeId}`);
  t.same(change1.json.parents, [ROOT]);
  t.same(change1.json.files, ['a.txt', 'dir/b.txt']);
  t.equal(change1.json.message, 'first\n');

  const second = await commitFiles(dir, { 'a.txt': 'a2\n' }, 'second');
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  const main2 = await bookmark('flow', 'main');
  t.equal(main2.commit, second, 'fast-forwarded');
  t.same((await s.api('GET', `/${s.org}/flow/changes/${main2.changeId}`)).json.parents, [main1.changeId], 'the new change sits on the first');

  await git.ok(['checkout', '--quiet', '-b', 'feat/x'], { cwd: dir });
  const feat = await commitFiles(dir, { 'c.txt': 'c\n' }, 'feature');
  await git.ok(['push', '--quiet', 'origin', 'feat/x'], { cwd: dir });
  t.equal((await bookmark('flow', 'feat/x')).commit, feat);
  t.equal((await s.api('GET', `/${s.org}/flow/content?path=a.txt&change_id=${main2.changeId}`)).json.content, Buffer.from('a2\n').toString('base64'));

  const clone = join(git.dir, 'flow-clone');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'flow', token), clone]);
  t.equal(await git.ok(['rev-parse', 'origin/main'], { cwd: clone }), second, 'a clone gets the pushed oids');
  t.equal(await git.ok(['rev-parse', 'origin/feat/x'], { cwd: clone }), feat);
  t.equal(await git.fsckProblems(clone), null, 'git fsck --strict is clean');
});

t.test('git push - --force rewrites a branch; without it git refuses the rewrite itself', async (t) => {
  const dir = join(git.dir, 'flow');
  await git.ok(['checkout', '--quiet', 'main'], { cwd: dir });
  const before = await bookmark('flow', 'main');
  await git.ok(['commit', '--quiet', '--amend', '-m', 'second, reworded'], { cwd: dir });
  const rewritten = await git.ok(['rev-parse', 'HEAD'], { cwd: dir });
  const plain = await git.run(['push', 'origin', 'HEAD:main'], { cwd: dir });
  t.not(plain.status, 0);
  t.match(plain.stderr, /rejected.*non-fast-forward|fetch first/);
  t.equal((await bookmark('flow', 'main')).commit, before.commit);
  await git.ok(['push', '--quiet', '--force', 'origin', 'HEAD:main'], { cwd: dir });
  const after = await bookmark('flow', 'main');
  t.equal(after.commit, rewritten, 'the bookmark moved back and on');
  t.not(after.changeId, before.changeId, 'a plain git commit is a change of its own (synthetic id)');
  t.equal((await s.api('GET', `/${s.org}/flow/changes/${before.changeId}`)).status, 200, 'the replaced change is kept');
});

t.test('git push - deleting a branch removes its bookmark; deleting the default bookmark is refused', async (t) => {
  const dir = join(git.dir, 'flow');
  await git.ok(['push', '--quiet', 'origin', ':feat/x'], { cwd: dir });
  t.equal((await bookmark('flow', 'feat/x')).status, 404);
  const main = await bookmark('flow', 'main');
  const refused = await git.run(['push', 'origin', ':main'], { cwd: dir });
  t.not(refused.status, 0);
  t.match(refused.stderr, /\[remote rejected\] main \(refusing to delete the default bookmark/);
  t.equal((await bookmark('flow', 'main')).commit, main.commit);
});

t.test('git push - tags, lightweight and annotated, are stored, listed and served; a tag deletes', async (t) => {
  const dir = join(git.dir, 'flow');
  const head = await git.ok(['rev-parse', 'HEAD'], { cwd: dir });
  await git.ok(['tag', 'v1'], { cwd: dir });
  await git.ok(['tag', '-a', 'v2', '-m', 'release two'], { cwd: dir });
  const tagObject = await git.ok(['rev-parse', 'v2'], { cwd: dir });
  await git.ok(['push', '--quiet', 'origin', 'v1', 'v2'], { cwd: dir });
  const listed = await git.ok(['ls-remote', cloneUrl(s, 'flow', token)]);
  const refs = new Map(listed.split('\n').map((line) => [line.split('\t')[1]!, line.split('\t')[0]!]));
  t.equal(refs.get('refs/tags/v1'), head);
  t.equal(refs.get('refs/tags/v2'), tagObject, 'the annotated tag keeps its object');
  t.equal(refs.get('refs/tags/v2^{}'), head);
  const clone = join(git.dir, 'tags-clone');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'flow', token), clone]);
  t.equal(await git.ok(['cat-file', '-p', 'v2'], { cwd: clone }).then((text) => /release two/.test(text)), true);
  t.equal(await git.fsckProblems(clone), null);
  await git.ok(['push', '--quiet', 'origin', ':refs/tags/v1'], { cwd: dir });
  t.notMatch(await git.ok(['ls-remote', '--tags', cloneUrl(s, 'flow', token)]), /refs\/tags\/v1\n|refs\/tags\/v1$/);
});

t.test('git push - --atomic with one refused ref applies nothing; without it the rest applies', async (t) => {
  const dir = join(git.dir, 'flow');
  const before = await bookmark('flow', 'main');
  const next = await commitFiles(dir, { 'atomic.txt': 'x\n' }, 'atomic');
  const atomic = await git.run(['push', '--atomic', 'origin', 'HEAD:main', 'HEAD:refs/meta/x'], { cwd: dir });
  t.not(atomic.status, 0);
  t.match(atomic.stderr, /refs\/meta\/x \(only refs\/heads\/\* and refs\/tags\/\* can be pushed here\)/);
  t.match(atomic.stderr, /main \(atomic push failed\)/);
  t.equal((await bookmark('flow', 'main')).commit, before.commit, 'main did not move');
  const plain = await git.run(['push', 'origin', 'HEAD:main', 'HEAD:refs/meta/x'], { cwd: dir });
  t.not(plain.status, 0, 'one ref was refused');
  t.equal((await bookmark('flow', 'main')).commit, next, 'the other one applied');
});

t.test('git push - a change-id header names the change; a rewritten commit with the same id evolves it', async (t) => {
  await createRepo(s, 'evolve');
  const dir = await workTree('evolve', 'evolve');
  const id = newChangeId();
  const c1 = await hashCommit(git, dir, { tree: await treeOf(dir, { 'a.txt': 'one\n' }), changeId: id, message: 'described' });
  await git.ok(['push', '--quiet', 'origin', `${c1}:refs/heads/main`], { cwd: dir });
  const change = await s.api('GET', `/${s.org}/evolve/changes/${id}`);
  t.equal(change.status, 200, 'the API knows the change by the header id');
  t.equal(change.json.current_commit_oid, c1);
  t.equal((await bookmark('evolve', 'main')).changeId, id);

  const c2 = await hashCommit(git, dir, { tree: await treeOf(dir, { 'a.txt': 'two\n' }), changeId: id, message: 'described again', time: 1_700_000_100 });
  await git.ok(['push', '--quiet', '--force', 'origin', `${c2}:refs/heads/main`], { cwd: dir });
  const evolved = await s.api('GET', `/${s.org}/evolve/changes/${id}`);
  t.equal(evolved.json.current_commit_oid, c2, 'the same change, its new commit');
  t.equal(evolved.json.message, 'described again\n');
  const evolution = await s.api('GET', `/${s.org}/evolve/changes/${id}/evolution`);
  t.same(
    evolution.json.evolution.map((e: { commit_oid: string; predecessor_oid: string | null }) => [e.commit_oid, e.predecessor_oid]),
    [
      [c2, c1],
      [c1, null],
    ],
  );
  await log.settled();
  const events = log.events('evolve');
  t.ok(events.some((e) => e.type === 'change.created' && (e.data.change as { id: string }).id === id));
  const evolvedEvent = events.find((e) => e.type === 'change.evolved');
  t.match(evolvedEvent?.data, { change: { id, current_commit_oid: c2 }, previous_current_commit_oid: c1 });
  t.match(pushEvents(events).at(-1), { reconciliation: { reconciled_commit_count: 1, touched_change_count: 1, changes_created_count: 0, evolog_inserted_count: 1 } });
});

t.test('git push - evolving a change rebases its descendants on the server, as an API evolve does', async (t) => {
  await createRepo(s, 'descend');
  const dir = await workTree('descend', 'descend');
  const id = newChangeId();
  const c1 = await hashCommit(git, dir, { tree: await treeOf(dir, { 'a.txt': 'one\n' }), changeId: id });
  await git.ok(['push', '--quiet', 'origin', `${c1}:refs/heads/main`], { cwd: dir });
  const child = await write(s, 'descend', id, { bookmark: 'child', message: 'child', files: { 'child.txt': 'child\n' } });
  const c2 = await hashCommit(git, dir, { tree: await treeOf(dir, { 'a.txt': 'two\n' }), changeId: id, time: 1_700_000_200 });
  await git.ok(['push', '--quiet', '--force', 'origin', `${c2}:refs/heads/main`], { cwd: dir });

  const rebased = await s.api('GET', `/${s.org}/descend/changes/${child.id}`);
  t.not(rebased.json.current_commit_oid, child.commit, 'the child has a new commit');
  t.same(rebased.json.parents, [id]);
  t.equal((await bookmark('descend', 'child')).commit, rebased.json.current_commit_oid, 'its bookmark follows');
  const clone = join(git.dir, 'descend-clone');
  await git.ok(['clone', '--quiet', '--no-checkout', cloneUrl(s, 'descend', token), clone]);
  t.equal(await git.ok(['rev-parse', 'origin/child^'], { cwd: clone }), c2, 'on the pushed commit');
  t.equal(await git.ok(['show', 'origin/child:a.txt'], { cwd: clone }), 'two', "with the pushed commit's content");
  t.equal(await git.ok(['show', 'origin/child:child.txt'], { cwd: clone }), 'child', 'and its own');
  t.equal(await git.fsckProblems(clone), null);
  await log.settled();
  const events = log.events('descend');
  t.ok(events.some((e) => e.type === 'change.evolved' && (e.data.change as { id: string }).id === child.id), 'the rebase is announced');
  t.match(pushEvents(events).at(-1), {
    updates: [{ ref: 'refs/heads/main', bookmark: 'main', before: c1, after: c2, action: 'updated' }],
    reconciliation: { reconciled_commit_count: 1, touched_change_count: 2, changes_created_count: 0, evolog_inserted_count: 2, invalid_change_id_header_count: 0, dirty_change_skip_count: 0 },
  });
});

t.test('git push - the webhook receiver gets push with the exact updates and counts', async (t) => {
  await createRepo(s, 'hooked');
  const dir = await workTree('hooked', 'hooked');
  const tree = await treeOf(dir, { 'a.txt': 'a\n' });
  const a = await hashCommit(git, dir, { tree, message: 'plain' });
  const b = await hashCommit(git, dir, { tree, parents: [a], changeId: newChangeId(), message: 'with an id' });
  const c = await hashCommit(git, dir, { tree, parents: [b], headers: ['change-id not-a-change-id'], message: 'bad id' });
  await git.ok(['push', '--quiet', 'origin', `${c}:refs/heads/main`, `${a}:refs/heads/side`], { cwd: dir });
  await log.settled();
  const first = pushEvents(log.events('hooked'));
  t.equal(first.length, 1, 'one push event for one push');
  t.same(first[0], {
    updates: [
      { ref: 'refs/heads/main', bookmark: 'main', before: null, after: c, action: 'created' },
      { ref: 'refs/heads/side', bookmark: 'side', before: null, after: a, action: 'created' },
    ],
    reconciliation: { reconciled_commit_count: 3, touched_change_count: 3, changes_created_count: 3, evolog_inserted_count: 3, invalid_change_id_header_count: 1, dirty_change_skip_count: 0 },
  });
  const kinds = log.events('hooked').map((e) => e.type);
  t.equal(kinds.filter((k) => k === 'change.created').length, 3, 'a change.created per new change');
  t.ok(kinds.includes('bookmark.moved') && kinds.includes('bookmark.created'), 'main moved off the virtual root, side was created');

  await git.ok(['push', '--quiet', '--force', 'origin', ':side', `${b}:refs/heads/main`], { cwd: dir });
  await log.settled();
  const second = pushEvents(log.events('hooked')).at(-1)!;
  // In the order git sent the commands.
  second.updates.sort((x: { ref: string }, y: { ref: string }) => x.ref.localeCompare(y.ref));
  t.same(second, {
    updates: [
      { ref: 'refs/heads/main', bookmark: 'main', before: c, after: b, action: 'updated' },
      { ref: 'refs/heads/side', bookmark: 'side', before: a, after: null, action: 'deleted' },
    ],
    reconciliation: { reconciled_commit_count: 0, touched_change_count: 0, changes_created_count: 0, evolog_inserted_count: 0, invalid_change_id_header_count: 0, dirty_change_skip_count: 0 },
  });
  t.ok(log.events('hooked').some((e) => e.type === 'bookmark.deleted'));
});

t.test('git push - a signed commit keeps its oid and its signature', async (t) => {
  await createRepo(s, 'signed');
  const dir = await workTree('signed', 'signed');
  const signature = ['gpgsig -----BEGIN PGP SIGNATURE-----', ' ', ' iQEzBAABCAAdFiEEexampleexampleexampleexampleexample=', ' =abcd', ' -----END PGP SIGNATURE-----'];
  const signed = await hashCommit(git, dir, { tree: await treeOf(dir, { 's.txt': 'signed\n' }), headers: signature, message: 'signed' });
  await git.ok(['push', '--quiet', 'origin', `${signed}:refs/heads/main`], { cwd: dir });
  t.equal((await bookmark('signed', 'main')).commit, signed, 'the API shows the same commit');
  const clone = join(git.dir, 'signed-clone');
  await git.ok(['clone', '--quiet', cloneUrl(s, 'signed', token), clone]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: clone }), signed);
  t.match(await git.ok(['cat-file', 'commit', 'HEAD'], { cwd: clone }), /\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz/);
  t.equal(await git.fsckProblems(clone), null);
});

t.test('git push - round trip: API writes, clone, commit, push, API reads, export: the same oids', async (t) => {
  await createRepo(s, 'trip');
  const base = await write(s, 'trip', ROOT, { bookmark: 'main', message: 'from the API', files: { 'a.txt': '1\n2\n3\n', 'lib/b.txt': 'b\n' } });
  const dir = await workTree('trip', 'trip');
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), base.commit);
  const pushed = await commitFiles(dir, { 'a.txt': '1\ntwo\n3\n', 'lib/c.txt': 'c\n' }, 'from git');
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  const main = await bookmark('trip', 'main');
  t.equal(main.commit, pushed);
  const change = await s.api('GET', `/${s.org}/trip/changes/${main.changeId}`);
  t.same(change.json.parents, [base.id]);
  t.same(change.json.files, ['a.txt', 'lib/c.txt']);
  const content = await s.api('GET', `/${s.org}/trip/content?path=a.txt&change_id=${main.changeId}`);
  t.equal(Buffer.from(content.json.content, 'base64').toString(), '1\ntwo\n3\n');
  const next = await write(s, 'trip', main.changeId, { bookmark: 'main', message: 'API again', files: { 'lib/d.txt': 'd\n' } });

  await git.ok(['pull', '--quiet', '--ff-only', 'origin', 'main'], { cwd: dir });
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), next.commit, 'the API write on top of the push fetches');
  const x = exportRepo({ s, repo: 'trip', base: '/acme/trip' });
  t.teardown(() => x.cleanup());
  const objects = (out: string): string[] => out.split('\n').map((l) => l.slice(0, 40)).filter(Boolean).sort();
  t.same(objects(x.git('rev-list', '--objects', 'refs/heads/main').stdout), objects(await git.ok(['rev-list', '--objects', 'HEAD'], { cwd: dir })), 'export and the work tree hold the same objects');
  t.equal(x.fsckProblems(), null);
});

t.test('git push - a repository with many refs: 1,001 tags pushed at once, all advertised for the next push', async (t) => {
  await createRepo(s, 'many');
  const dir = await workTree('many', 'many');
  const head = await commitFiles(dir, { 'a.txt': 'a\n' }, 'tagged');
  const names = Array.from({ length: 1001 }, (_, i) => `t${String(i).padStart(4, '0')}`);
  await git.ok(['update-ref', '--stdin'], { cwd: dir, input: names.map((n) => `create refs/tags/${n} ${head}\n`).join('') });
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main', '--tags'], { cwd: dir });
  // More refs than the front end lists itself: the receive pool lists them.
  const res = await fetch(`${s.url}/${s.org}/many.git/info/refs?service=git-receive-pack`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/x-git-receive-pack-advertisement');
  const refs = responseLines(Buffer.from(await res.arrayBuffer()))
    .filter((l) => / refs\//.test(l))
    .map((l) => l.split('\0')[0]!.split(' ')[1]!);
  t.equal(refs.length, 1002, 'main and every tag');
  t.ok(refs.includes('refs/tags/t1000') && refs.includes('refs/heads/main'));
  const next = await commitFiles(dir, { 'b.txt': 'b\n' }, 'after the tags');
  await git.ok(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir });
  t.equal((await bookmark('many', 'main')).commit, next);
});
