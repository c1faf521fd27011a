import t from 'tap';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { syntheticChangeId } from '../../src/vcs/ids.js';
import { cloneUrl, createRepo, gitClient } from './helpers.js';

/**
 * A push is one transaction (API §14): killed with SIGKILL while a push of many commits is under
 * way, the server comes back with all of the push or none of it — the bookmark at the new tip with
 * every change, or where it was with no change of the push — and a fresh clone passes
 * `git fsck --strict`.
 */
const COMMITS = 300;
const s = await serverForFile(t);
const git = gitClient(t);
await createRepo(s, 'durable');
const dir = join(git.dir, 'work');
await git.ok(['init', '--quiet', '-b', 'main', dir]);

/** `COMMITS` commits on `branch` (git fast-import: seconds, not minutes), each rewriting a few files. */
async function history(branch: string, from: string | null): Promise<{ first: string; tip: string }> {
  const parts: string[] = [];
  for (let c = 0; c < COMMITS; c++) {
    const message = `${branch} ${c}\n`;
    parts.push(`commit refs/heads/${branch}\nmark :${c + 1}\ncommitter Git Client <client@example.com> ${1_700_000_000 + c} +0000\ndata ${Buffer.byteLength(message)}\n${message}`);
    if (c === 0 && from) parts.push(`from ${from}\n`);
    for (let f = 0; f < 3; f++) {
      const content = `${branch} commit ${c} file ${f}\n`;
      parts.push(`M 100644 inline dir-${c % 7}/file-${(c * 3 + f) % 40}.txt\ndata ${Buffer.byteLength(content)}\n${content}\n`);
    }
  }
  await git.ok(['fast-import', '--quiet'], { cwd: dir, input: parts.join('') });
  const tip = await git.ok(['rev-parse', `refs/heads/${branch}`], { cwd: dir });
  const first = (await git.ok(['rev-list', '--reverse', `refs/heads/${branch}`, ...(from ? [`^${from}`] : [])], { cwd: dir })).split('\n')[0]!;
  return { first, tip };
}

async function bookmarkCommit(name: string): Promise<string | null> {
  const res = await s.api('GET', `/${s.org}/durable/bookmarks/${name}`);
  if (res.status !== 200) return null;
  const change = await s.api('GET', `/${s.org}/durable/changes/${res.json.change_id}`);
  return change.status === 200 ? change.json.current_commit_oid : null;
}

t.test('git push durability - kill -9 during a push of many commits: all of it or none of it after restart', async (t) => {
  // How long a whole push takes here: the kills land at fractions of it (before the pack is read,
  // while it is read, while it applies, just after).
  const warm = await history('warm', null);
  const started = Date.now();
  await git.ok(['push', '--quiet', cloneUrl(s, 'durable', await s.token({ scopes: ['write'] })), 'warm:warm'], { cwd: dir });
  const pushMs = Date.now() - started;
  let from: string | null = warm.tip;
  const outcomes: string[] = [];
  for (const [round, delayMs] of [0.3, 0.6, 0.8, 0.95, 1.2].map((f) => Math.round(f * pushMs)).entries()) {
    const branch = `b${round}`;
    const { first, tip } = await history(branch, from);
    const token = await s.token({ scopes: ['write'] });
    const before = await bookmarkCommit(branch);
    const push = spawn('git', ['push', '--quiet', cloneUrl(s, 'durable', token), `${branch}:${branch}`], { cwd: dir, stdio: 'ignore', env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
    const exited = new Promise<void>((resolve) => push.on('close', () => resolve()));
    await new Promise((r) => setTimeout(r, delayMs));
    await s.kill();
    await exited;
    await s.restart();

    const after = await bookmarkCommit(branch);
    const firstChange = await s.api('GET', `/${s.org}/durable/changes/${syntheticChangeId(first)}`);
    if (after === tip) {
      outcomes.push('all');
      t.equal(firstChange.status, 200, `round ${round}: the whole push is there, its first commit included`);
      const listed = await s.api('GET', `/${s.org}/durable/changes?bookmark=${branch}&limit=200`);
      t.equal(listed.status, 200);
      t.equal(listed.json.changes.length, 200, 'the history is listed');
    } else {
      outcomes.push('none');
      t.equal(after, before, `round ${round}: the bookmark is where it was`);
      t.equal(firstChange.status, 404, 'and no change of the push exists');
      // What the killed push did not land, the next one brings.
      await git.ok(['push', '--quiet', cloneUrl(s, 'durable', await s.token({ scopes: ['write'] })), `${branch}:${branch}`], { cwd: dir });
      t.equal(await bookmarkCommit(branch), tip, 'pushed again after the restart');
    }
    from = tip;
  }
  t.comment(`a push took ${pushMs} ms; outcomes: ${outcomes.join(', ')}`);
  const clone = join(git.dir, 'fresh');
  await git.ok(['clone', '--quiet', '--mirror', cloneUrl(s, 'durable', await s.token({ scopes: ['read'] })), clone]);
  t.equal(await git.fsckProblems(clone), null, 'a fresh clone passes git fsck --strict');
  t.equal(await git.ok(['rev-parse', 'refs/heads/b4'], { cwd: clone }), from);
});
