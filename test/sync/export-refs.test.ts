import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanupWork, createRepo, makeUpstream, passwordAuth, pullAndWait, startSyncEnv, type SyncEnv, type Upstream } from './fixtures.js';

/**
 * `repohost export` of a pulled repository keeps what the upstream had beside its branches: its
 * tags (a lightweight one as a ref to the commit, an annotated one as the same tag object) and
 * the agentblame notes ref.
 */
let env: SyncEnv;
let up: Upstream;
let note: string;
let notesOid: string;

t.before(async () => {
  env = await startSyncEnv();
  up = await makeUpstream(env.git, 'tagged');
  const g = (args: string[], input?: string): Promise<string> => env.git.gitIn(up.work, args, { input });
  note = '{"version":2,"agent":"claude"}';
  await g(['notes', '--ref=agentblame', 'add', '-m', note, up.oids.c3]);
  await g(['push', '--quiet', join(env.git.root, 'tagged.git'), 'refs/notes/agentblame']);
  notesOid = await env.git.git('tagged', ['rev-parse', 'refs/notes/agentblame']);
});
t.teardown(async () => {
  cleanupWork(up);
  await env.close();
});

t.test('export - pulled tags and agentblame notes are exported as refs/tags and refs/notes; fsck is clean', async (t) => {
  await createRepo(env.s, 'mirror', { url: up.url, auth: passwordAuth });
  const sync = await pullAndWait(env.s, 'mirror');
  t.equal(sync.status, 'completed', sync.error ?? '');

  const parent = mkdtempSync(join(tmpdir(), 'repohost-export-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  const dir = join(parent, 'mirror.git');
  const out = await env.s.cli(['export', 'acme/mirror', dir, '--json']);
  t.equal(out.code, 0, out.stderr);
  const summary = JSON.parse(out.stdout);
  t.equal(summary.tags, 2);
  t.equal(summary.notes, 1);

  const git = (...args: string[]): string => {
    const res = spawnSync('git', args, { cwd: dir, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: parent }, encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`git ${args.join(' ')}: ${res.stderr}`);
    return res.stdout.trim();
  };
  const fsck = spawnSync('git', ['fsck', '--strict', '--no-progress', '--no-dangling'], { cwd: dir, env: { ...process.env, HOME: parent }, encoding: 'utf8' });
  t.equal(fsck.status, 0, fsck.stderr);
  t.notMatch(`${fsck.stdout}${fsck.stderr}`, /error|warning|missing|broken/i, 'git fsck --strict is clean');

  t.same(git('tag', '-l').split('\n'), ['v1.0', 'v2.0']);
  t.equal(git('cat-file', '-t', 'v1.0'), 'tag', 'the annotated tag is still a tag object');
  t.equal(git('rev-parse', 'refs/tags/v1.0'), up.oids.tagV1, 'with the upstream tag object oid');
  t.equal(git('rev-parse', 'v1.0^{commit}'), up.oids.c1);
  t.equal(git('cat-file', '-t', 'v2.0'), 'commit', 'the lightweight tag names the commit');
  t.equal(git('rev-parse', 'refs/tags/v2.0'), up.oids.c3);
  t.equal(git('show-ref', '-d', 'v1.0').split('\n')[1], `${up.oids.c1} refs/tags/v1.0^{}`, 'packed-refs peels the annotated tag');
  t.equal(git('rev-parse', 'refs/notes/agentblame'), notesOid);
  t.equal(git('notes', '--ref', 'agentblame', 'show', up.oids.c3), note, 'the note reads back through git notes');
  t.equal(git('rev-parse', 'refs/heads/main'), up.oids.c3);
});
