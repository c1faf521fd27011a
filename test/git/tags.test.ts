import t from 'tap';
import { join } from 'node:path';
import { cleanupWork, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv, type SyncEnv, type Upstream } from '../sync/fixtures.js';
import { cloneUrl, gitClient, packObjects, postUploadPack, protocol, PROTOCOLS, responseLines, sideBandPack, v2Request } from './helpers.js';

/**
 * Tags and notes pulled from an upstream are served as git refs (API §14): an annotated tag as
 * the same tag object, advertised with its peeled commit; `include-tag` sends a tag along with
 * the commit it names; the agentblame notes ref can be fetched.
 */
let env: SyncEnv;
let up: Upstream;
let notesOid: string;
const git = gitClient(t);

t.before(async () => {
  env = await startSyncEnv();
  up = await makeUpstream(env.git, 'tagged');
  await env.git.gitIn(up.work, ['notes', '--ref=agentblame', 'add', '-m', '{"version":2}', up.oids.c3]);
  await env.git.gitIn(up.work, ['push', '--quiet', join(env.git.root, 'tagged.git'), 'refs/notes/agentblame']);
  notesOid = await env.git.git('tagged', ['rev-parse', 'refs/notes/agentblame']);
  await createRepo(env.s, 'mirror', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'mirror');
  if (sync.status !== 'completed') throw new Error(`pull: ${JSON.stringify(sync)}`);
});
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});

t.test('git tags - a clone gets the pulled tags, the annotated one as the same tag object', async (t) => {
  const token = await env.s.token({ scopes: ['read'] });
  for (const v of PROTOCOLS) {
    const dir = join(git.dir, `tags-v${v}`);
    await git.ok([...protocol(v), 'clone', '--quiet', cloneUrl(env.s, 'mirror', token), dir]);
    t.same((await git.ok(['tag', '-l'], { cwd: dir })).split('\n'), ['v1.0', 'v2.0'], `v${v}`);
    t.equal(await git.ok(['rev-parse', 'refs/tags/v1.0'], { cwd: dir }), up.oids.tagV1, 'the tag object keeps its oid');
    t.equal(await git.ok(['cat-file', '-t', 'v1.0'], { cwd: dir }), 'tag');
    t.equal(await git.ok(['rev-parse', 'v1.0^{commit}'], { cwd: dir }), up.oids.c1);
    t.equal(await git.ok(['rev-parse', 'refs/tags/v2.0'], { cwd: dir }), up.oids.c3);
    t.equal(await git.fsckProblems(dir), null, `v${v}: git fsck --strict is clean`);
  }
});

t.test('git tags - ls-remote lists branches, tags with their peeled commits, and the notes ref', async (t) => {
  const token = await env.s.token({ scopes: ['read'] });
  for (const v of PROTOCOLS) {
    const listed = await git.ok([...protocol(v), 'ls-remote', cloneUrl(env.s, 'mirror', token)]);
    const refs = new Map(listed.split('\n').map((line) => [line.split('\t')[1]!, line.split('\t')[0]!]));
    t.equal(refs.get('HEAD'), up.oids.c3, `v${v}: HEAD`);
    t.equal(refs.get('refs/heads/main'), up.oids.c3);
    t.equal(refs.get('refs/heads/feat/login'), up.oids.feat);
    t.equal(refs.get('refs/tags/v1.0'), up.oids.tagV1);
    t.equal(refs.get('refs/tags/v1.0^{}'), up.oids.c1, 'the annotated tag is peeled');
    t.equal(refs.get('refs/notes/agentblame'), notesOid);
    t.notOk([...refs.keys()].some((name) => name.startsWith('refs/jj/')), 'kept commits are not advertised');
  }
});

t.test('git tags - the notes ref fetches, and git reads the note', async (t) => {
  const token = await env.s.token({ scopes: ['read'] });
  const dir = join(git.dir, 'notes');
  await git.ok(['clone', '--quiet', cloneUrl(env.s, 'mirror', token), dir]);
  await git.ok(['fetch', '--quiet', 'origin', 'refs/notes/agentblame:refs/notes/agentblame'], { cwd: dir });
  t.equal(await git.ok(['notes', '--ref', 'agentblame', 'show', up.oids.c3], { cwd: dir }), '{"version":2}');
  t.equal(await git.fsckProblems(dir), null);
});

t.test('git tags - include-tag sends an annotated tag with the commit it names, and only then', async (t) => {
  const token = await env.s.token({ scopes: ['read'] });
  const fetchC1 = async (extra: string[]): Promise<Map<string, string>> => {
    const res = await postUploadPack(env.s, 'mirror', token, v2Request('fetch', [`want ${up.oids.c1}`, 'no-progress', ...extra, 'done']));
    t.equal(res.status, 200);
    t.equal(responseLines(res.body)[0], 'packfile');
    return packObjects(git, sideBandPack(res.body));
  };
  const withTag = await fetchC1(['include-tag']);
  t.equal(withTag.get(up.oids.tagV1), 'tag', 'with include-tag: the tag on c1 comes along');
  t.equal(withTag.get(up.oids.c1), 'commit');
  const without = await fetchC1([]);
  t.notOk(without.has(up.oids.tagV1), 'without it: no tag');

  // Through git: fetching main alone follows the tag without a second request for it.
  const dir = join(git.dir, 'follow');
  await git.ok(['init', '--quiet', dir]);
  await git.ok(['remote', 'add', 'origin', cloneUrl(env.s, 'mirror', token)], { cwd: dir });
  const res = await git.run(['-c', 'protocol.version=2', 'fetch', 'origin', 'main:refs/remotes/origin/main'], { cwd: dir, env: { GIT_TRACE_PACKET: '1' } });
  t.equal(res.status, 0, res.stderr);
  t.equal(await git.ok(['rev-parse', 'refs/tags/v1.0'], { cwd: dir }), up.oids.tagV1, 'the annotated tag was followed');
  t.equal((res.stderr.match(/fetch> command=fetch/g) ?? []).length, 1, 'in one fetch request');
});
