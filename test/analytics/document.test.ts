import t from 'tap';
import { HISTORY_LIMIT, addCommits, emptyDocument, windowed } from '../../src/actors/system/analytics/document.js';
import type { HistoryItem } from '../../src/actors/system/analytics/document.js';

const NOW = Date.parse('2026-05-01T12:00:00.000Z');
const ago = (ms: number): string => new Date(NOW - ms).toISOString();
const H = 3_600_000;
const D = 24 * H;

function item(sha: string, date: string, author: string, added: number, ai: number, provider?: string, model?: string): HistoryItem {
  return {
    date,
    sha,
    author,
    message: sha,
    added,
    removed: 0,
    aiLines: ai,
    providers: provider ? { [provider]: ai } : {},
    models: model ? { [model]: ai } : {},
  };
}

t.test('periods - windows keep the commits inside them and recompute summary and contributors', async (t) => {
  const doc = emptyDocument();
  doc.summary.updated = ago(0);
  addCommits(doc, [
    item('a', ago(2 * H), 'x@e', 10, 4, 'claude', 'sonnet'),
    item('b', ago(3 * D), 'y@e', 5, 5, 'cursor'),
    item('c', ago(10 * D), 'x@e', 7, 0),
    item('d', ago(40 * D), 'y@e', 1, 1, 'claude', 'opus'),
  ]);
  t.same(windowed(doc, 'all', NOW), doc, 'all is the stored document');
  const day = windowed(doc, '24h', NOW);
  t.same(day.history.map((h) => h.sha), ['a']);
  t.same(day.summary, { totalLines: 10, aiLines: 4, humanLines: 6, providers: { claude: 4 }, models: { sonnet: 4 }, updated: doc.summary.updated });
  t.same(day.contributors, { 'x@e': { totalLines: 10, aiLines: 4, humanLines: 6, providers: { claude: 4 }, models: { sonnet: 4 }, commitCount: 1 } });
  const week = windowed(doc, '1w', NOW);
  t.same(week.history.map((h) => h.sha), ['a', 'b']);
  t.same(week.summary.providers, { claude: 4, cursor: 5 });
  t.equal(week.contributors['y@e']!.commitCount, 1);
  const month = windowed(doc, '1m', NOW);
  t.same(month.history.map((h) => h.sha), ['a', 'b', 'c']);
  t.same([month.summary.totalLines, month.summary.aiLines, month.summary.humanLines], [22, 9, 13]);
  t.same(month.contributors['x@e']!.commitCount, 2);
  t.same(windowed(doc, '1m', NOW)._meta, doc._meta);
  t.same([doc.summary.totalLines, doc.summary.aiLines], [23, 10], 'the stored totals are unchanged by views');
});

t.test('history - newest first, new commits before stored ones of the same date, at most the newest 1,000', async (t) => {
  const doc = emptyDocument();
  const same = ago(H);
  addCommits(doc, [item('old', same, 'x', 1, 0)]);
  addCommits(doc, [item('child', same, 'x', 1, 0), item('newest', ago(0), 'x', 1, 0)]);
  t.same(doc.history.map((h) => h.sha), ['newest', 'child', 'old']);
  const many = Array.from({ length: HISTORY_LIMIT + 5 }, (_, i) => item(`m${i}`, ago(i * 1000 + 2 * H), 'y', 1, 1, 'claude'));
  addCommits(doc, many);
  t.equal(doc.history.length, HISTORY_LIMIT);
  t.same(doc.history.slice(0, 3).map((h) => h.sha), ['newest', 'child', 'old']);
  t.equal(doc.summary.totalLines, HISTORY_LIMIT + 5 + 3, 'the summary covers every commit, not only the kept history');
  t.equal(doc.contributors.y!.commitCount, HISTORY_LIMIT + 5);
});

t.test('contributors and counts keyed by names every JavaScript object has stay ordinary keys', async (t) => {
  const doc = emptyDocument();
  addCommits(doc, [item('a', ago(H), '__proto__', 3, 1, 'constructor', '__proto__'), item('b', ago(H), 'toString', 2, 0)]);
  t.same(Object.keys(doc.contributors).sort(), ['__proto__', 'toString']);
  t.equal(doc.contributors['__proto__']!.totalLines, 3);
  t.equal(doc.contributors['__proto__']!.commitCount, 1);
  t.equal(Object.getPrototypeOf(doc.contributors), Object.prototype, 'the prototype was not replaced');
  t.ok(Object.hasOwn(doc.summary.providers, 'constructor') && Object.hasOwn(doc.summary.models, '__proto__'), 'own keys');
  t.equal((doc.summary.providers as Record<string, unknown>)['constructor'], 1);
  t.equal((doc.summary.models as Record<string, unknown>)['__proto__'], 1);
  t.equal(({} as Record<string, unknown>).totalLines, undefined, 'nothing leaked onto Object.prototype');
  const text = JSON.stringify(doc.contributors);
  t.match(text, /"__proto__":\{"totalLines":3/, 'serialized as a key');
  t.same(windowed(JSON.parse(JSON.stringify(doc)), '24h', NOW).contributors['__proto__']!.commitCount, 1, 'a stored document keeps the key');
});
