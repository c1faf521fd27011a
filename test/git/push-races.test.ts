import t from 'tap';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient, ROOT, write } from './helpers.js';

/**
 * A git push and an API write racing for the same bookmark (API §6.3, §14): they serialize on
 * the repository's actor, so exactly one wins. A push that finds the bookmark moved is refused
 * `stale info`: by the server's compare-and-swap when the move came after git read the refs, by
 * git's own lease check when it came before; git prints `[rejected] … (stale info)` for both. An
 * apply-ops whose guard no longer holds gets 409. Never both, never a 5xx.
 */
const s = await serverForFile(t);
const token = await s.token({ scopes: ['write'] });
const git = gitClient(t);
await createRepo(s, 'race');
let base = await write(s, 'race', ROOT, { bookmark: 'main', files: { 'a.txt': 'base\n' } });
const dir = join(git.dir, 'race');
await git.ok(['clone', '--quiet', cloneUrl(s, 'race', token), dir]);

t.test('git push races - a push and an apply-ops moving the same bookmark: exactly one wins', async (t) => {
  const wins = { push: 0, api: 0 };
  for (let round = 0; round < 8; round++) {
    await git.ok(['fetch', '--quiet', 'origin'], { cwd: dir });
    await git.ok(['reset', '--quiet', '--hard', 'origin/main'], { cwd: dir });
    writeFileSync(join(dir, 'a.txt'), `pushed ${round}\n`);
    await git.ok(['commit', '--quiet', '-am', `push ${round}`], { cwd: dir });
    const pushed = await git.ok(['rev-parse', 'HEAD'], { cwd: dir });
    const apiWrite = async (): Promise<{ status: number; code?: string; commit?: string }> => {
      // Spread the start over the push's own time, so each side sometimes comes first.
      await new Promise((r) => setTimeout(r, (round * 37) % 200));
      const res = await s.api('POST', `/${s.org}/race/apply-ops`, {
        body: { base_change_id: base.id, message: `api ${round}`, ops: [{ op: 'write', path: 'a.txt', content: `api ${round}\n` }], bookmarks: [{ name: 'main', expected_change_id: base.id }] },
      });
      return { status: res.status, code: res.json?.error?.code, commit: res.json?.change?.current_commit_oid };
    };
    const lease = `--force-with-lease=main:${base.commit}`;
    const [push, api] = await Promise.all([git.run(['push', lease, 'origin', 'HEAD:main'], { cwd: dir }), apiWrite()]);
    t.ok(api.status < 500, `round ${round}: the API answered ${api.status}`);
    const main = await s.api('GET', `/${s.org}/race/bookmarks/main`);
    const change = await s.api('GET', `/${s.org}/race/changes/${main.json.change_id}`);
    if (push.status === 0) {
      wins.push++;
      t.equal(api.status, 409, `round ${round}: the push won, the API write was refused`);
      t.equal(api.code, 'ABORTED');
      t.equal(change.json.current_commit_oid, pushed, 'main is at the pushed commit');
    } else {
      wins.api++;
      t.equal(api.status, 201, `round ${round}: the API write won`);
      t.match(push.stderr, /\[rejected\] +HEAD -> main \(stale info\)/, 'git printed why the push was refused');
      t.equal(change.json.current_commit_oid, api.commit, 'main is at the API write');
    }
    base = { id: main.json.change_id, commit: change.json.current_commit_oid, time: 0 };
  }
  t.comment(`pushes won ${wins.push}, API writes won ${wins.api}`);
  t.notOk(s.logs.some((l) => /"level":"error"/.test(l)), 'nothing was logged as an error');
});

t.test('git push races - a bookmark moved after git read the refs: the server refuses the push stale info', async (t) => {
  await git.ok(['fetch', '--quiet', 'origin'], { cwd: dir });
  await git.ok(['reset', '--quiet', '--hard', 'origin/main'], { cwd: dir });
  writeFileSync(join(dir, 'a.txt'), 'late push\n');
  await git.ok(['commit', '--quiet', '-am', 'late push'], { cwd: dir });
  // git runs pre-push after it has read the refs and before it sends the pack: the API write lands in between.
  const marks = mkdtempSync(join(git.dir, 'marks-'));
  const hook = join(dir, '.git', 'hooks', 'pre-push');
  writeFileSync(hook, `#!/bin/sh\ntouch '${marks}/read'\nwhile [ ! -f '${marks}/go' ]; do sleep 0.05; done\n`);
  chmodSync(hook, 0o755);
  const push = git.run(['push', 'origin', 'HEAD:main'], { cwd: dir });
  while (!existsSync(join(marks, 'read'))) await new Promise((r) => setTimeout(r, 20));
  const api = await s.api('POST', `/${s.org}/race/apply-ops`, {
    body: { base_change_id: base.id, message: 'in between', ops: [{ op: 'write', path: 'a.txt', content: 'api\n' }], bookmarks: [{ name: 'main', expected_change_id: base.id }] },
  });
  t.equal(api.status, 201);
  writeFileSync(join(marks, 'go'), '');
  const res = await push;
  rmSync(hook);
  t.not(res.status, 0);
  // git had no lease to check: the refusal is the server's `ng refs/heads/main stale info`, which git prints so.
  t.match(res.stderr, /\[rejected\] +HEAD -> main \(stale info\)/, 'refused by the compare-and-swap, and git printed it');
  const main = await s.api('GET', `/${s.org}/race/bookmarks/main`);
  t.equal(main.json.change_id, api.json.change.id, 'main stays at the API write');
});
