import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventEnvelope } from '../../src/storage/records.js';
import { startEventLog } from '../helpers/webhook-receiver.js';
import { ROOT, applyOps, exportRepo, startWithRepo, write } from './helpers.js';

/** `lines.txt`: numbered lines kept apart by a separator line, so edits of different lines merge. */
function lines(edits: Record<number, string> = {}): string {
  return Array.from({ length: 10 }, (_, i) => `${edits[i] ?? `line ${i}`}\n--\n`).join('');
}

t.test('agent session - a chain of 21 changes, an evolve in the middle rebases the rest, a conflict is resolved, export is clean', async (t) => {
  const f = await startWithRepo(t, 'session');
  const repoId = (await f.s.api('GET', f.base)).json.id as string;
  const log = await startEventLog(f.s);
  t.teardown(() => log.close());

  // The first write on the virtual root of an empty repository creates the initial change and
  // advances the default bookmark in the same operation.
  const first = await applyOps(f, { base_change_id: ROOT, message: 'initial', ops: [write('README.md', '# session\n'), write('lines.txt', lines())] });
  t.equal(first.status, 201, first.text);
  const ids: string[] = [first.json.change.id];
  t.same(first.json.change.parents, [ROOT]);
  t.same(first.json.bookmarks, [{ name: 'main', change_id: ids[0], is_default: true }]);
  t.match(first.json.operation_id, /^op_/);
  t.equal((await f.s.api('GET', f.base)).json.head_change_id, ids[0], 'head_change_id follows the default bookmark');

  // 20 more changes in a chain, each moving main; change 12 edits line 3.
  for (let i = 1; i <= 20; i++) {
    const ops = [write(`step-${i}.txt`, `step ${i}\n`)];
    if (i === 12) ops.push(write('lines.txt', lines({ 3: 'line 3 by twelve' })));
    const res = await applyOps(f, { base_change_id: ids[i - 1], message: `step ${i}`, ops, bookmarks: [{ name: 'main' }] });
    t.equal(res.status, 201, res.text);
    t.same(res.json.change.parents, [ids[i - 1]]);
    ids.push(res.json.change.id);
  }
  t.equal((await f.s.api('GET', f.base)).json.head_change_id, ids[20]);
  const before = await Promise.all(ids.map(async (id) => (await f.s.api('GET', `${f.base}/changes/${id}`)).json));

  // Evolve change 5 on the same line: 6..20 are rebased in the same operation.
  const evolved = await applyOps(f, { change_id: ids[5], expected_commit_oid: before[5].current_commit_oid, ops: [write('lines.txt', lines({ 3: 'line 3 by five' }))] });
  t.equal(evolved.status, 200, evolved.text);
  t.equal(evolved.json.change.id, ids[5]);
  t.equal(evolved.json.change.message, 'step 5', 'an omitted message is kept on evolve');
  t.not(evolved.json.change.current_commit_oid, before[5].current_commit_oid);

  const after = await Promise.all(ids.map(async (id) => (await f.s.api('GET', `${f.base}/changes/${id}`)).json));
  for (let i = 0; i <= 4; i++) t.equal(after[i].current_commit_oid, before[i].current_commit_oid, `change ${i} (an ancestor) is untouched`);
  for (let i = 6; i <= 20; i++) {
    t.equal(after[i].id, ids[i], `change ${i} keeps its id`);
    t.not(after[i].current_commit_oid, before[i].current_commit_oid, `change ${i} has a new commit`);
    t.same(after[i].parents, [ids[i - 1]], `change ${i} keeps its parent change`);
    t.equal(after[i].message, `step ${i}`);
    t.same(after[i].authors, before[i].authors, 'authors are kept on rebase');
  }
  for (let i = 6; i <= 11; i++) t.equal(after[i].is_conflicted, false, `change ${i} rebased cleanly`);
  t.equal(after[12].is_conflicted, true, 'change 12 edited the same line: conflicted');
  t.same(after[12].conflicts, ['lines.txt']);
  t.same(after[12].files.sort(), ['lines.txt', 'step-12.txt'], 'files are paths changed against the first parent');
  for (let i = 13; i <= 20; i++) t.equal(after[i].is_conflicted, true, `change ${i} inherits the conflict`);

  // Any PATCH without resolutions on a conflicted change is refused with the conflicts.
  const refused = await f.s.api('PATCH', `${f.base}/changes/${ids[12]}`, { body: { message: 'just the message' } });
  t.equal(refused.status, 409);
  t.equal(refused.json.error.code, 'MERGE_CONFLICT');
  t.same(refused.json.error.details.conflict_paths, ['lines.txt']);
  const hunks = refused.json.error.details.conflicts[0].hunks as Array<{ hunk_id: string; target: { content: string }; source: { content: string } }>;
  t.equal(hunks.length, 1);
  t.equal(Buffer.from(hunks[0]!.target.content, 'base64').toString(), 'line 3 by five\n', 'target is the new parent');
  t.equal(Buffer.from(hunks[0]!.source.content, 'base64').toString(), 'line 3 by twelve\n', 'source is the change itself');

  const viaApplyOps = await applyOps(f, { change_id: ids[12], ops: [write('other.txt', 'x')] });
  t.equal(viaApplyOps.status, 409, 'apply-ops cannot write into a conflicted change either');
  t.equal(viaApplyOps.json.error.code, 'MERGE_CONFLICT');

  // Resolve per hunk with our own text: change 12 and everything after it are clean again.
  const resolved = await f.s.api('PATCH', `${f.base}/changes/${ids[12]}`, {
    body: { resolutions: [{ path: 'lines.txt', hunks: [{ hunk_id: hunks[0]!.hunk_id, content: 'line 3 by five and twelve\n' }] }] },
  });
  t.equal(resolved.status, 200, resolved.text);
  t.equal(resolved.json.is_conflicted, false);
  t.equal(resolved.json.message, 'step 12');
  const final = await Promise.all(ids.map(async (id) => (await f.s.api('GET', `${f.base}/changes/${id}`)).json));
  for (let i = 12; i <= 20; i++) t.equal(final[i].is_conflicted, false, `change ${i} is clean after the resolution`);
  t.same(final[12].conflicts, []);

  const evolution = await f.s.api('GET', `${f.base}/changes/${ids[12]}/evolution`);
  t.equal(evolution.status, 200);
  t.same(
    evolution.json.evolution.map((e: { commit_oid: string }) => e.commit_oid),
    [final[12].current_commit_oid, after[12].current_commit_oid, before[12].current_commit_oid],
    'evolution: resolution, rebase, creation — newest first',
  );
  t.equal(evolution.json.evolution[2].predecessor_oid, null);
  t.equal(evolution.json.evolution[0].predecessor_oid, after[12].current_commit_oid);

  // The list walks main's history: children first, all 21 changes.
  const listed = await f.s.api('GET', `${f.base}/changes?limit=200`);
  t.same(listed.json.changes.map((c: { id: string }) => c.id), [...ids].reverse());

  // Events: one change.created per change, change.evolved for 5 and each rebased descendant.
  await log.settled(30_000);
  const events = log.events(repoId);
  t.equal(events.filter((e) => e.type === 'change.created').length, 21);
  const evolvedEvents = events.filter((e) => e.type === 'change.evolved');
  const fromEvolve5 = evolvedEvents.slice(0, 16) as Array<EventEnvelope & { data: { change: { id: string }; previous_current_commit_oid: string } }>;
  t.same(fromEvolve5.map((e) => e.data.change.id), ids.slice(5));
  t.same(fromEvolve5.map((e) => e.data.previous_current_commit_oid), before.slice(5).map((c) => c.current_commit_oid));
  const created = events.find((e) => e.type === 'change.created')!.data.change as Record<string, unknown>;
  t.ok(Array.isArray(created.authors) && typeof created.authored_at === 'string', 'change events carry authors and authored_at');
  const moved = events.filter((e) => e.type === 'bookmark.moved');
  t.equal(moved.length, 21, 'main moved once per change (the first time from the root)');
  t.same(moved[0]!.data.from, { change_id: ROOT, commit_oid: '0'.repeat(40) });

  // The export: fsck-clean, main's log is the chain, contents as resolved, change ids in headers.
  const x = exportRepo(f);
  t.teardown(() => x.cleanup());
  t.equal(x.fsckProblems(), null, 'git fsck --strict is clean');
  const history = x.git('log', '--format=%H', 'main').stdout.trim().split('\n');
  t.same(history, final.map((c) => c.current_commit_oid).reverse(), 'git log main is the chain');
  t.equal(x.git('show', 'main:lines.txt').stdout, lines({ 3: 'line 3 by five and twelve' }));
  t.equal(x.git('show', 'main:step-20.txt').stdout, 'step 20\n');
  t.match(x.git('cat-file', '-p', final[7].current_commit_oid).stdout, new RegExp(`\nchange-id ${ids[7]}\n`));
  const kept = x.git('for-each-ref', '--format=%(refname)', 'refs/jj/keep').stdout.trim().split('\n');
  t.ok(kept.includes(`refs/jj/keep/${before[12].current_commit_oid}`), 'replaced commits stay kept');
  t.ok(kept.includes(`refs/jj/keep/${after[12].current_commit_oid}`), 'the conflicted commit is kept too');
  t.match(x.git('cat-file', '-p', after[12].current_commit_oid).stdout, /\njj:trees [0-9a-f]{40}( [0-9a-f]{40}){2}\n/, 'conflicts keep the raw jj layout');
  t.equal(x.git('symbolic-ref', 'HEAD').stdout.trim(), 'refs/heads/main');

  // git can clone the export and check out the default bookmark.
  const clone = `${x.dir}-clone`;
  t.equal(x.git('clone', '-q', x.dir, clone).status, 0, 'git clone works');
  t.equal(readFileSync(join(clone, 'lines.txt'), 'utf8'), lines({ 3: 'line 3 by five and twelve' }));
  t.equal(readFileSync(join(clone, 'step-20.txt'), 'utf8'), 'step 20\n');
});
