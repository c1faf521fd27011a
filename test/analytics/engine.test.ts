import t from 'tap';
import { AnalyticsEngine } from '../../src/actors/system/analytics/engine.js';
import type { AnalyticsState } from '../../src/storage/analytics-store.js';
import { AgentTable } from '../../src/actors/system/analytics/agent-table.js';
import type { AnalyticsDocument } from '../../src/actors/system/analytics/document.js';
import { K, lastPart, Ranges } from '../../src/storage/keys.js';
import { readDocument } from '../../src/actors/system/analytics/stored-document.js';
import type { Storage } from '../../src/storage/database.js';
import { CLAUDE, HOUR, T0, TestHistory, lines, seedRepo, tempStorage } from './fixtures.js';

const REPO = 'repo_engine';
const at = (hours: number): Date => new Date(T0.getTime() + hours * HOUR);
const docOf = (storage: Storage): AnalyticsDocument => readDocument(storage.meta, REPO)!;
const stateOf = (storage: Storage): AnalyticsState => storage.meta.get(K.analyticsState(REPO)) as AnalyticsState;
const keptOids = (storage: Storage): string[] => [...storage.meta.getKeys(Ranges.analyticsCommits(REPO))].map(lastPart).sort();

/**
 * The shared history (dates in hours after T0):
 *   c1 (0h, human)       a.txt: one two <blank> three             +3
 *   c2 (1h, Claude)      a.txt: + four five                        +2 AI claude (agent table)
 *   s1 (1.5h, human)     d.txt on c1: two lines                    +2
 *   c3 (2h, human)       b.ts, trailers claude_code/sonnet         +4 AI claude/claude-sonnet-4-5
 *   c4 (3h, human)       c.ts 5 lines, note covers 2–3 (cursor);   +5 (2 AI cursor/gpt-5), −1
 *                        drops "one" from a.txt
 *   m5 (4h)              merge of c4 and s1                        not counted
 */
function buildHistory() {
  const h = new TestHistory();
  const a1 = lines('one', 'two', '', 'three');
  const c1 = h.commit({ files: { 'a.txt': a1 }, date: at(0), message: 'start' });
  const a2 = lines('one', 'two', '', 'three', 'four', 'five');
  const c2 = h.commit({ files: { 'a.txt': a2 }, parents: [c1], authors: [CLAUDE], date: at(1), message: 'more' });
  const s1 = h.commit({ files: { 'a.txt': a1, 'd.txt': lines('d1', 'd2') }, parents: [c1], date: at(1.5), message: 'side' });
  const b = lines('export const b = 1;', '', 'export function f() {', '  return b;', '}');
  const c3 = h.commit({
    files: { 'a.txt': a2, 'b.ts': b },
    parents: [c2],
    attribution: { provider: 'claude_code', model: 'claude-sonnet-4-5' },
    date: at(2),
    message: 'agent work\n\nwith a body\n',
  });
  const c = lines('c1', 'c2', 'c3', 'c4', 'c5');
  const a4 = lines('two', '', 'three', 'four', 'five');
  const c4 = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': c }, parents: [c3], date: at(3), message: 'mixed' });
  const m5 = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': c, 'd.txt': lines('d1', 'd2') }, parents: [c4, s1], date: at(4), message: 'merge' });
  const note = (startLine: number, endLine: number) =>
    JSON.stringify({
      version: 2,
      timestamp: at(3).toISOString(),
      attributions: [{ path: 'c.ts', startLine, endLine, category: 'ai_generated', provider: 'cursor', model: 'gpt-5', confidence: 1, matchType: 'exact', contentHash: 'x' }],
    });
  h.writeNotes({ [c4]: note(2, 3) });
  h.headOid = m5;
  return { h, c1, c2, s1, c3, c4, m5, a4, b, c, note };
}

t.test('engine - a rebuild counts every attribution rule exactly and skips merges', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h, c1, c2, s1, c3, c4 } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults(), { now: () => at(10) });
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'rebuild');
  t.equal(outcome.computed, 6, 'five commits and the merge were read');
  const doc = docOf(storage);
  t.same(doc.summary, {
    totalLines: 16,
    aiLines: 8,
    humanLines: 8,
    providers: { claude: 6, cursor: 2 },
    models: { 'claude-sonnet-4-5': 4, 'gpt-5': 2 },
    updated: at(10).toISOString(),
  });
  t.same(doc.contributors, {
    'hana@example.com': { totalLines: 14, aiLines: 6, humanLines: 8, providers: { claude: 4, cursor: 2 }, models: { 'claude-sonnet-4-5': 4, 'gpt-5': 2 }, commitCount: 4 },
    'noreply@anthropic.com': { totalLines: 2, aiLines: 2, humanLines: 0, providers: { claude: 2 }, models: {}, commitCount: 1 },
  });
  t.same(
    doc.history.map((x) => [x.sha, x.date, x.author, x.message, x.added, x.removed, x.aiLines, x.providers, x.models]),
    [
      [c4, at(3).toISOString(), 'hana@example.com', 'mixed', 5, 1, 2, { cursor: 2 }, { 'gpt-5': 2 }],
      [c3, at(2).toISOString(), 'hana@example.com', 'agent work\n\nwith a body\n', 4, 0, 4, { claude: 4 }, { 'claude-sonnet-4-5': 4 }],
      [s1, at(1.5).toISOString(), 'hana@example.com', 'side', 2, 0, 0, {}, {}],
      [c2, at(1).toISOString(), 'noreply@anthropic.com', 'more', 2, 0, 2, { claude: 2 }, {}],
      [c1, at(0).toISOString(), 'hana@example.com', 'start', 3, 0, 0, {}, {}],
    ],
  );
  t.same(doc._meta, { lastAttempt: at(10).toISOString(), lastSuccess: at(10).toISOString(), lastError: '' });
  t.same(stateOf(storage), { engine: 1, table: AgentTable.defaults().fingerprint, head: h.headOid, notes: h.notesOid, rebuilding: false, error: '' });
  t.equal(keptOids(storage).length, 6, 'a result is kept for every reachable commit, the merge included');
  t.notOk(engine.needsRun(REPO), 'nothing to do at the same head');
});

t.test('engine - a new commit on the head is added incrementally and equals a rebuild', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  const other = tempStorage();
  seedRepo(other.storage, REPO, null);
  t.teardown(async () => {
    await cleanup();
    await other.cleanup();
  });
  const { h, m5, a4, b, c } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults(), { now: () => at(10) });
  await engine.run(REPO);
  const c6 = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': c, 'd.txt': lines('d1', 'd2'), 'e.txt': lines('e') }, parents: [m5], date: at(5), message: 'six' });
  h.headOid = c6;
  t.ok(engine.needsRun(REPO));
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'incremental');
  t.equal(outcome.computed, 1, 'only the new commit was diffed');
  const doc = docOf(storage);
  t.equal(doc.summary.totalLines, 17);
  t.equal(doc.history[0]!.sha, c6);
  t.equal(doc.contributors['hana@example.com']!.commitCount, 5);

  const fresh = new AnalyticsEngine(other.storage, h, AgentTable.defaults(), { now: () => at(10) });
  t.equal((await fresh.run(REPO)).kind, 'rebuild');
  t.same(docOf(storage), docOf(other.storage), 'incremental and full computation agree');
});

t.test('engine - a rewritten head rebuilds, reusing kept results and dropping unreachable ones', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h, c1, c2, c3, a4, b } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults());
  await engine.run(REPO);
  const c4b = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': lines('x') }, parents: [c3], date: at(3), message: 'mixed, evolved' });
  h.headOid = c4b;
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'rebuild', 'the new head does not descend from the old one');
  t.equal(outcome.computed, 1, 'only the rewritten commit was diffed');
  t.equal(outcome.reused, 3);
  t.same(keptOids(storage), [c1, c2, c3, c4b].sort(), 'results of commits no longer reachable are gone');
  const doc = docOf(storage);
  t.same(doc.summary, { totalLines: 10, aiLines: 6, humanLines: 4, providers: { claude: 6 }, models: { 'claude-sonnet-4-5': 4 }, updated: doc.summary.updated });
  t.same(doc.history.map((x) => x.sha), [c4b, c3, c2, c1]);
});

t.test('engine - new notes recompute only the commits whose note changed', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h, c4, note } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults());
  await engine.run(REPO);
  h.writeNotes({ [c4]: note(1, 5) });
  t.ok(engine.needsRun(REPO), 'a notes import alone makes the document stale');
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'rebuild');
  t.equal(outcome.computed, 1);
  t.equal(outcome.reused, 5);
  const doc = docOf(storage);
  t.equal(doc.summary.aiLines, 11);
  t.same(doc.summary.providers, { claude: 6, cursor: 5 });
});

t.test('engine - an interrupted rebuild is redone rather than trusted', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults());
  await engine.run(REPO);
  await storage.meta.put(K.analyticsState(REPO), { ...stateOf(storage), rebuilding: true });
  t.ok(engine.needsRun(REPO));
  t.equal((await engine.run(REPO)).kind, 'rebuild');
  t.equal(stateOf(storage).rebuilding, false);
});

t.test('engine - a changed agent table recomputes every kept result', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h } = buildHistory();
  await new AnalyticsEngine(storage, h, AgentTable.defaults()).run(REPO);
  const table = AgentTable.parse(JSON.stringify({ agents: [{ provider: 'Hana Bot', emails: ['hana@example.com'] }] }));
  const engine = new AnalyticsEngine(storage, h, table);
  t.ok(engine.needsRun(REPO));
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'rebuild');
  t.equal(outcome.computed, 6);
  t.same(docOf(storage).summary.providers, { hana_bot: 8, claude: 6, cursor: 2 }, "Hana's unnoted lines are now agent lines; notes and trailers still win");
});

t.test('engine - a conflicted commit is counted in its materialized view', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const h = new TestHistory();
  const p = h.commit({ files: { 'f.txt': lines('base') } });
  h.headOid = h.commit({
    files: { 'f.txt': lines('ours') },
    conflict: { base: { 'f.txt': lines('base') }, side: { 'f.txt': lines('theirs') } },
    parents: [p],
    date: at(1),
  });
  await new AnalyticsEngine(storage, h, AgentTable.defaults()).run(REPO);
  const doc = docOf(storage);
  // <<<<<<< target, ours, ||||||| base, (base kept), =======, theirs, >>>>>>> source; no layout files.
  t.same(doc.history.map((x) => [x.added, x.removed]), [[6, 0], [1, 0]]);
});

t.test('engine - an empty default bookmark yields an empty document', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const h = new TestHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults());
  t.notOk(engine.needsRun(REPO), 'an empty repository has nothing to compute');
  const c1 = h.commit({ files: { 'a.txt': lines('a') } });
  h.headOid = c1;
  await engine.run(REPO);
  h.headOid = null;
  t.equal((await engine.run(REPO)).kind, 'rebuild');
  t.same(docOf(storage).summary.totalLines, 0);
  t.same(keptOids(storage), []);
});

t.test('engine - a missing object fails the run and records why, keeping the counts', async (t) => {
  const { storage, cleanup } = tempStorage();
  seedRepo(storage, REPO, null);
  t.teardown(cleanup);
  const { h } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults(), { now: () => at(10) });
  await engine.run(REPO);
  const before = docOf(storage);
  h.headOid = 'f'.repeat(40);
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'failed');
  t.match(outcome.error, /commit f{40} is missing/);
  const doc = docOf(storage);
  t.same(doc.summary, before.summary, 'the last good counts stay');
  t.same(doc._meta, { lastAttempt: at(10).toISOString(), lastSuccess: at(10).toISOString(), lastError: outcome.error });
  t.not(stateOf(storage).head, h.headOid, 'the state still names the last computed head');
  t.equal(stateOf(storage).error, outcome.error, 'the state carries the error for the status');
  t.ok(engine.needsRun(REPO));
});

t.test('engine - a repository deleted during a run gets no analytics records back', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  seedRepo(storage, REPO, null);
  const { h } = buildHistory();
  const deleting = Object.assign(Object.create(h) as TestHistory, {
    objects() {
      storage.meta.removeSync(K.repo(REPO));
      return h.store;
    },
  });
  const outcome = await new AnalyticsEngine(storage, deleting, AgentTable.defaults()).run(REPO);
  t.equal(outcome.kind, 'rebuild');
  t.equal(storage.meta.get(K.analytics(REPO)), undefined);
  t.equal(storage.meta.get(K.analyticsState(REPO)), undefined);
  t.same(keptOids(storage), []);
});

t.test('engine - more new commits than one write chunk are written in chunks, with the same result', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  seedRepo(storage, REPO, null);
  const { h, m5 } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults(), { writeChunk: 2 });
  await engine.run(REPO);
  let head = m5;
  for (let i = 0; i < 5; i++) head = h.commit({ files: { 'n.txt': lines(...Array.from({ length: i + 1 }, (_, j) => `n${j}`)) }, parents: [head], date: at(5 + i) });
  h.headOid = head;
  const outcome = await engine.run(REPO);
  t.equal(outcome.kind, 'rebuild');
  t.equal(outcome.computed, 5, 'only the new commits were diffed');
  t.equal(outcome.reused, 6);
  t.equal(docOf(storage).summary.totalLines, 16 + 5);
  t.equal(keptOids(storage).length, 11);
});

t.test('engine - a note follows its commit through the server rewriting it, twice', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  seedRepo(storage, REPO, null);
  const { h, c3, c4, a4, b, c } = buildHistory();
  const engine = new AnalyticsEngine(storage, h, AgentTable.defaults());
  await engine.run(REPO);
  const c4b = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': c, 'x.txt': lines('x') }, parents: [c3], date: at(3), message: 'mixed, evolved' });
  const c4c = h.commit({ files: { 'a.txt': a4, 'b.ts': b, 'c.ts': c, 'x.txt': lines('x', 'y') }, parents: [c3], date: at(3), message: 'mixed, evolved again' });
  h.predecessors.set(c4b, c4).set(c4c, c4b);
  h.headOid = c4c;
  t.equal((await engine.run(REPO)).kind, 'rebuild');
  const top = docOf(storage).history[0]!;
  t.equal(top.sha, c4c);
  t.same([top.added, top.aiLines, top.providers, top.models], [7, 2, { cursor: 2 }, { 'gpt-5': 2 }], "c4's note covers c.ts lines 2–3 of its rewrite's rewrite");
  h.predecessors.clear();
  h.writeNotes({});
  await engine.run(REPO);
  t.equal(docOf(storage).history[0]!.aiLines, 0, 'without the note, the lines are human again');
});

t.test('engine - a cancelled rebuild stops at its next yield and is redone by the next run', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  seedRepo(storage, REPO, null);
  const { h, c4, note } = buildHistory();
  await new AnalyticsEngine(storage, h, AgentTable.defaults()).run(REPO);
  h.writeNotes({ [c4]: note(1, 5) });
  const stopping = new AnalyticsEngine(storage, h, AgentTable.defaults(), { sliceMs: 0 });
  const running = stopping.run(REPO);
  stopping.cancel();
  t.equal((await running).kind, 'cancelled');
  t.equal(stateOf(storage).rebuilding, true, 'the interrupted rebuild is marked');
  t.equal(stateOf(storage).error, '', 'a cancelled run is not a failure');
  const next = new AnalyticsEngine(storage, h, AgentTable.defaults());
  t.ok(next.needsRun(REPO));
  t.equal((await next.run(REPO)).kind, 'rebuild');
  t.equal(docOf(storage).summary.aiLines, 11);
});
