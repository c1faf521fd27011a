import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRepo, passwordAuth, pullAndWait, startSyncEnv } from '../sync/fixtures.js';
import type { TestServer } from '../helpers/server.js';

/**
 * Analytics through the whole server: history imported from a real git server (with an
 * agentblame v2 note), then written through apply-ops by a human, by a token whose `author`
 * claim is Claude, and with `attribution` trailers. Every number below is counted by hand.
 */
const DAY = 86_400_000;
const HANA = { name: 'Hana Human', email: 'hana@example.com' };
const CLAUDE_DOMAIN = 'noreply@anthropic.com';

async function analytics(s: TestServer, query = '', token?: string) {
  return s.api('GET', `/acme/notes-repo/analytics${query}`, { token });
}

async function waitCurrent(s: TestServer, totalLines: number) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await analytics(s);
    if (res.json?.status === 'current' && res.json.analytics.summary.totalLines === totalLines) return res.json;
    if (Date.now() > deadline) throw new Error(`analytics did not become current with ${totalLines} lines: ${res.text.slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test('analytics - notes, trailers, agent authors and humans are counted exactly, by period, and follow new changes', async (t) => {
  const env = await startSyncEnv();
  const work = mkdtempSync(join(tmpdir(), 'repohost-analytics-work-'));
  t.teardown(async () => {
    await env.close();
    rmSync(work, { recursive: true, force: true });
  });
  const { s, git } = env;
  const now = Date.now();
  const u1Date = new Date(now - 40 * DAY);
  const u2Date = new Date(now - 10 * DAY);

  // ---- upstream: U1 (40 days ago, human), U2 (10 days ago) with a note on 2 of its 5 lines
  const url = await git.createRepo('notes-up');
  const dated = (d: Date) => {
    const date = `${Math.floor(d.getTime() / 1000)} +0000`;
    return { GIT_AUTHOR_NAME: HANA.name, GIT_AUTHOR_EMAIL: HANA.email, GIT_AUTHOR_DATE: date, GIT_COMMITTER_NAME: HANA.name, GIT_COMMITTER_EMAIL: HANA.email, GIT_COMMITTER_DATE: date };
  };
  const g = (args: string[], d: Date = u2Date) => git.gitIn(work, args, { env: dated(d) });
  await g(['init', '--quiet', '-b', 'main']);
  writeFileSync(join(work, 'legacy.txt'), 'a\nb\n\nc\n');
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', 'legacy'], u1Date);
  const u1 = await g(['rev-parse', 'HEAD']);
  writeFileSync(join(work, 'c.ts'), 'c1\nc2\nc3\nc4\nc5\n');
  await g(['add', '-A']);
  await g(['commit', '--quiet', '-m', 'partly cursor'], u2Date);
  const u2 = await g(['rev-parse', 'HEAD']);
  const note = {
    version: 2,
    timestamp: u2Date.toISOString(),
    attributions: [{ path: 'c.ts', startLine: 2, endLine: 3, category: 'ai_generated', provider: 'cursor', model: 'gpt-5', confidence: 1, matchType: 'exact', contentHash: 'h' }],
  };
  await g(['notes', '--ref=agentblame', 'add', '-m', JSON.stringify(note), u2]);
  await g(['push', '--quiet', join(git.root, 'notes-up.git'), 'main', 'refs/notes/agentblame']);

  await createRepo(s, 'notes-repo', { url, auth: passwordAuth });
  let res = await analytics(s);
  t.equal(res.status, 200);
  t.same(res.json, { analytics: null, status: 'none' }, 'never computed: null and none');

  const sync = await pullAndWait(s, 'notes-repo');
  t.equal(sync.status, 'completed', JSON.stringify(sync.error));

  // ---- writes through apply-ops on main
  const base = '/acme/notes-repo';
  const head = async () => (await s.api('GET', base)).json.head_change_id as string;
  const apply = async (body: Record<string, unknown>, token?: string) => {
    const r = await s.api('POST', `${base}/apply-ops`, { body: { base_change_id: await head(), bookmarks: [{ name: 'main' }], ...body }, token });
    t.equal(r.status, 201, r.text);
    return r.json.change.current_commit_oid as string;
  };
  const a1 = await apply({ message: 'human lines', authors: [HANA], ops: [{ op: 'write', path: 'h.txt', content: 'h1\nh2\n' }] });
  const claudeToken = await s.token({ author: [['Claude', CLAUDE_DOMAIN]] });
  const a2 = await apply({ message: 'by claude', ops: [{ op: 'write', path: 'claude.ts', content: 'k1\n\nk2\nk3\nk4\n' }] }, claudeToken);
  const a3 = await apply({
    message: 'with trailers',
    authors: [HANA],
    attribution: { provider: 'claude_code', model: 'claude-sonnet-4-5' },
    ops: [{ op: 'write', path: 'h.txt', content: 'h1\nh2 changed\nh3\n' }],
  });

  // U1 +3 human; U2 +5 (2 cursor/gpt-5); A1 +2 human; A2 +4 claude (agent table);
  // A3 +2 −1 claude/claude-sonnet-4-5 (trailers).
  const all = await waitCurrent(s, 16);
  t.equal(all.status, 'current');
  const doc = all.analytics;
  t.equal(doc.version, 2);
  t.same(
    { ...doc.summary, updated: undefined },
    { totalLines: 16, aiLines: 8, humanLines: 8, providers: { claude: 6, cursor: 2 }, models: { 'claude-sonnet-4-5': 2, 'gpt-5': 2 }, updated: undefined },
  );
  t.match(doc.summary.updated, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  t.same(doc.contributors, {
    [HANA.email]: { totalLines: 12, aiLines: 4, humanLines: 8, providers: { cursor: 2, claude: 2 }, models: { 'gpt-5': 2, 'claude-sonnet-4-5': 2 }, commitCount: 4 },
    [CLAUDE_DOMAIN]: { totalLines: 4, aiLines: 4, humanLines: 0, providers: { claude: 4 }, models: {}, commitCount: 1 },
  });
  const changes = [a1, a2, a3];
  t.same(
    doc.history.map((h: Record<string, unknown>) => [h.sha, h.author, h.message, h.added, h.removed, h.aiLines, h.providers, h.models]),
    [
      [changes[2], HANA.email, 'with trailers', 2, 1, 2, { claude: 2 }, { 'claude-sonnet-4-5': 2 }],
      [changes[1], CLAUDE_DOMAIN, 'by claude', 4, 0, 4, { claude: 4 }, {}],
      [changes[0], HANA.email, 'human lines', 2, 0, 0, {}, {}],
      [u2, HANA.email, 'partly cursor\n', 5, 0, 2, { cursor: 2 }, { 'gpt-5': 2 }],
      [u1, HANA.email, 'legacy\n', 3, 0, 0, {}, {}],
    ],
    'newest first; the message is the description',
  );
  t.equal(doc.history[3].date, new Date(Math.floor(u2Date.getTime() / 1000) * 1000).toISOString(), 'date is the author time');
  t.same(Object.keys(doc.history[0]).sort(), ['added', 'aiLines', 'author', 'date', 'message', 'models', 'providers', 'removed', 'sha']);
  t.same(Object.keys(doc._meta).sort(), ['lastAttempt', 'lastError', 'lastSuccess']);
  t.equal(doc._meta.lastError, '');

  // ---- periods
  const day = (await analytics(s, '?period=24h')).json;
  t.equal(day.status, 'current');
  t.same(day.analytics.history.map((h: { sha: string }) => h.sha), changes.slice().reverse(), 'only the writes of today');
  t.same({ ...day.analytics.summary, updated: undefined }, { totalLines: 8, aiLines: 6, humanLines: 2, providers: { claude: 6 }, models: { 'claude-sonnet-4-5': 2 }, updated: undefined });
  t.equal(day.analytics.summary.updated, doc.summary.updated);
  t.same(day.analytics.contributors, {
    [HANA.email]: { totalLines: 4, aiLines: 2, humanLines: 2, providers: { claude: 2 }, models: { 'claude-sonnet-4-5': 2 }, commitCount: 2 },
    [CLAUDE_DOMAIN]: { totalLines: 4, aiLines: 4, humanLines: 0, providers: { claude: 4 }, models: {}, commitCount: 1 },
  });
  t.same((await analytics(s, '?period=1w')).json.analytics.summary.totalLines, 8, 'U2 (10 days) is outside a week');
  const month = (await analytics(s, '?period=1m')).json.analytics;
  t.same(month.history.map((h: { sha: string }) => h.sha), [...changes.slice().reverse(), u2], 'U1 (40 days) is outside a month');
  t.same([month.summary.totalLines, month.summary.aiLines, month.summary.humanLines], [13, 8, 5]);
  t.same(month.summary.providers, { claude: 6, cursor: 2 });
  t.equal(month.contributors[HANA.email].commitCount, 3);
  t.same((await analytics(s, '?period=all')).json, all, 'all is the stored document');

  res = await analytics(s, '?period=1y');
  t.equal(res.status, 400);
  t.equal(res.json.error.code, 'INVALID_REQUEST');
  t.equal((await analytics(s, '?since=1d')).status, 400, 'unknown query keys are refused');

  // ---- a read-only token may read it; a token for another repository may not
  t.equal((await analytics(s, '', await s.token({ scopes: ['git:read'] }))).status, 200);
  t.equal((await analytics(s, '', await s.token({ scopes: ['repo:read'] }))).status, 403, 'analytics needs git:read');

  // ---- a new change on the default bookmark: current again, counted incrementally
  const a4 = await apply({ message: 'one more', authors: [HANA], ops: [{ op: 'write', path: 'more.txt', content: 'm\n' }] });
  const again = await waitCurrent(s, 17);
  t.equal(again.analytics.history[0].sha, a4);
  t.equal(again.analytics.contributors[HANA.email].commitCount, 5);
  t.equal(again.analytics.summary.aiLines, 8);

  // ---- the server rewrites U2 (an evolve rebases everything above it): its note follows it
  const listed = await s.api('GET', `${base}/changes?limit=200`);
  const u2Change = (listed.json.changes as Array<{ id: string; current_commit_oid: string }>).find((c) => c.current_commit_oid === u2)!;
  const evolved = await s.api('POST', `${base}/apply-ops`, { body: { change_id: u2Change.id, ops: [{ op: 'write', path: 'legacy2.txt', content: 'z\n' }] } });
  t.equal(evolved.status, 200, evolved.text);
  const rewritten = await waitCurrent(s, 18);
  const u2b = rewritten.analytics.history.find((h: { message: string }) => h.message === 'partly cursor\n');
  t.equal(u2b.sha, evolved.json.change.current_commit_oid);
  t.same([u2b.added, u2b.aiLines, u2b.providers, u2b.models], [6, 2, { cursor: 2 }, { 'gpt-5': 2 }], 'the note of U2 counts for its rewrite');
  t.same([rewritten.analytics.summary.aiLines, rewritten.analytics.history.length], [8, 6], 'the rebased descendants kept their attribution');
});
