import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentTable, normalizeProvider, providerOfModel } from '../../src/actors/system/analytics/agent-table.js';
import { AgentblameNotes, parseAgentblameNote, readNotesIndex } from '../../src/actors/system/analytics/agentblame-notes.js';
import { diffLineCounts } from '../../src/actors/system/analytics/line-diff.js';
import { MAX_EDITS } from '../../src/vcs/line-alignment.js';
import { writeBlob, writeTree } from '../../src/vcs/git-object.js';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { TestHistory, lines } from './fixtures.js';

const text = (s: string): Uint8Array => Buffer.from(s, 'utf8');

t.test('providers - spellings of one provider are one key', async (t) => {
  for (const raw of ['claude', 'claude_code', 'claudeCode', 'ClaudeCode', 'Claude Code', 'claude-code', 'CLAUDE_CODE', 'anthropic']) {
    t.equal(normalizeProvider(raw), 'claude', raw);
  }
  t.equal(normalizeProvider('GitHub Copilot'), 'copilot');
  t.equal(normalizeProvider('openai'), 'codex');
  t.equal(normalizeProvider('Some New Agent'), 'some_new_agent', 'unknown providers keep a normalized key');
  t.equal(normalizeProvider('  '), 'unknown');
  t.equal(providerOfModel('claude-opus-4-1'), 'claude');
  t.equal(providerOfModel('gpt-5-codex'), 'codex');
  t.equal(providerOfModel('gemini-2.5-pro'), 'gemini');
  t.equal(providerOfModel('llama-3'), 'unknown');
});

t.test('agent table - default identities are recognized, humans are not', async (t) => {
  const table = AgentTable.defaults();
  const provider = (name: string, email: string | null): string | null => table.match({ name, email })?.provider ?? null;
  t.equal(provider('Claude', 'noreply@anthropic.com'), 'claude');
  t.equal(provider('Anyone', 'someone@eng.anthropic.com'), 'claude', 'subdomains count');
  t.equal(provider('Anyone', 'someone@notanthropic.com'), null, 'a look-alike domain does not');
  t.equal(provider('Codex', 'codex@openai.com'), 'codex');
  t.equal(provider('Cursor Agent', 'cursoragent@cursor.com'), 'cursor');
  t.equal(provider('Copilot', '198982749+Copilot@users.noreply.github.com'), 'copilot');
  t.equal(provider('someone', '198982749+Copilot@users.noreply.github.com'), 'copilot', 'a GitHub noreply login names the account');
  t.equal(provider('gemini-code-assist[bot]', null), 'gemini');
  t.equal(provider('devin-ai-integration[bot]', '158243242+devin-ai-integration[bot]@users.noreply.github.com'), 'devin');
  t.equal(provider('Paul (aider)', 'paul@example.com'), 'aider', 'aider marks the author name');
  t.equal(provider('opencode', null), 'opencode');
  t.equal(provider('Hana Human', 'hana@example.com'), null);
  t.equal(provider('Hana Human', null), null);
});

t.test('agent table - a file extends the defaults, or replaces them, and bad files are refused with the reason', async (t) => {
  const extended = AgentTable.parse(JSON.stringify([{ provider: 'Internal Bot', model: 'm1', emails: ['bot@corp.example'] }]));
  t.same(extended.match({ name: 'x', email: 'BOT@corp.example' }), { provider: 'internal_bot', model: 'm1' });
  t.equal(extended.match({ name: 'Claude', email: 'noreply@anthropic.com' })?.provider, 'claude');
  const only = AgentTable.parse(JSON.stringify({ include_defaults: false, agents: [{ provider: 'x', names: ['X'] }] }));
  t.equal(only.match({ name: 'Claude', email: 'noreply@anthropic.com' }), null);
  t.equal(only.match({ name: 'x', email: null })?.provider, 'x');
  t.not(only.fingerprint, extended.fingerprint);
  t.throws(() => AgentTable.parse('{'), /not valid JSON/);
  const dir = mkdtempSync(join(tmpdir(), 'repohost-agents-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'ok.json'), JSON.stringify([{ provider: 'x', names: ['X Bot'] }]));
  writeFileSync(join(dir, 'bad.json'), JSON.stringify({ agents: [{ provider: 'x' }] }));
  t.equal(AgentTable.load(join(dir, 'ok.json')).match({ name: 'x bot', email: null })?.provider, 'x');
  t.equal(AgentTable.load('').fingerprint, AgentTable.defaults().fingerprint, 'no file: the built-in table');
  t.throws(() => AgentTable.load(join(dir, 'bad.json')), /bad\.json: agents\[0\]: give at least one of/, 'the error names the file');
  t.throws(() => AgentTable.parse('{"agent": []}'), /unknown field agent/);
  t.throws(() => AgentTable.parse('[{"names": ["x"]}]'), /provider must be a non-empty string/);
  t.throws(() => AgentTable.parse('[{"provider": "x"}]'), /give at least one of/);
  t.throws(() => AgentTable.parse('[{"provider": "x", "name_patterns": ["("]}]'), /agents\[0\]: invalid name pattern/);
  t.throws(() => AgentTable.parse('[{"provider": "x", "emails": "a@b"}]'), /emails must be an array of strings/);
});

t.test('notes - v1, v2 and v3 notes give the same ranges; unreadable notes give none', async (t) => {
  const v1 = { version: 1, timestamp: 't', attributions: [{ path: 'src/a.ts', start_line: 2, end_line: 4, category: 'ai_generated', provider: 'claude_code', model: 'claude-sonnet-4-5' }] };
  const v2 = { version: 2, timestamp: 't', attributions: [{ path: 'src/a.ts', startLine: 2, endLine: 4, category: 'ai_generated', provider: 'claudeCode', model: 'claude-sonnet-4-5' }] };
  const v3 = { version: 3, timestamp: 't', sessions: { s1: { agent: 'claude', model: 'claude-sonnet-4-5' } }, files: { 'src/a.ts': [{ session: 's1', lines: '2-3,4' }] } };
  const expected = [{ path: 'src/a.ts', start: 2, end: 4, provider: 'claude', model: 'claude-sonnet-4-5' }];
  t.same(parseAgentblameNote(JSON.stringify(v1)), expected);
  t.same(parseAgentblameNote(JSON.stringify(v2)), expected);
  const r3 = parseAgentblameNote(JSON.stringify(v3));
  t.same(r3.map((r) => [r.start, r.end, r.provider, r.model]), [[2, 3, 'claude', 'claude-sonnet-4-5'], [4, 4, 'claude', 'claude-sonnet-4-5']]);
  t.same(parseAgentblameNote('not json'), []);
  t.same(parseAgentblameNote(JSON.stringify({ version: 2, attributions: [{ path: 'a', startLine: 5, endLine: 2, provider: 'x' }, { path: 'a', startLine: 0, endLine: 2 }, 'junk'] })), []);
  t.same(parseAgentblameNote(JSON.stringify({ version: 2, attributions: [{ path: 'a', startLine: 1, endLine: 1, model: 'gpt-5' }] }))[0]!.provider, 'codex', 'a missing provider is inferred from the model');
});

t.test('notes - the index reads flat and fanned-out notes trees and ignores other entries', async (t) => {
  const store = new MemoryObjectStore();
  const oidA = 'ab'.padEnd(40, '1');
  const oidB = 'cd'.padEnd(40, '2');
  const blobA = writeBlob(store, 'A');
  const blobB = writeBlob(store, 'B');
  const fan = writeTree(store, [{ name: oidB.slice(2), mode: '100644', oid: blobB }]);
  const root = writeTree(store, [
    { name: oidA, mode: '100644', oid: blobA },
    { name: 'cd', mode: '40000', oid: fan },
    { name: 'README', mode: '100644', oid: blobA },
  ]);
  t.same([...readNotesIndex(store, root)].sort(), [[oidA, blobA], [oidB, blobB]]);
  t.throws(() => readNotesIndex(store, 'e'.repeat(40)), /missing/);

  const h = new TestHistory();
  const c = h.commit({ files: { 'a.txt': 'a\n' } });
  h.writeNotes({ [c]: JSON.stringify({ version: 2, attributions: [{ path: 'a.txt', startLine: 1, endLine: 1, provider: 'cursor' }] }) });
  const notes = AgentblameNotes.read(h.store, h.notesOid);
  t.ok(notes.blobOf(c));
  t.equal(notes.rangesOf(c)[0]!.provider, 'cursor');
  t.same(notes.rangesOf('0'.repeat(40)), []);
  t.equal(AgentblameNotes.read(h.store, null).blobOf(c), null);
});

t.test('line counts - blank lines are not counted and added lines are numbered in the new file', async (t) => {
  t.same(diffLineCounts(text(''), text(lines('a', '', 'b'))), { removed: 0, added: [1, 3] });
  t.same(diffLineCounts(text(lines('a', '', 'b')), text('')), { removed: 2, added: [] });
  t.same(diffLineCounts(text(lines('a', 'b', 'c', 'd')), text(lines('a', 'x', '  ', 'c', 'd', 'e'))), { removed: 1, added: [2, 6] });
  t.same(diffLineCounts(text('a\nb'), text('a\nb\n')), { removed: 1, added: [2] }, 'a changed last line without a newline is a changed line');
  t.same(diffLineCounts(text(lines('same')), text(lines('same'))), { removed: 0, added: [] });
  t.same(diffLineCounts(text('a\r\n\t\r\n'), text('a\r\n\t\r\nb\r\n')), { removed: 0, added: [3] }, 'whitespace-only lines are blank');
});

t.test('line counts - a rewrite beyond the edit budget falls back to a multiset count', async (t) => {
  const n = 2 * MAX_EDITS + 500;
  const before = Array.from({ length: n }, (_, i) => `old ${i}\n`);
  const after = Array.from({ length: n }, (_, i) => (i % 2 === 0 ? `old ${i}\n` : `new ${i}\n`)).reverse();
  const result = diffLineCounts(text(before.join('')), text(after.join('')));
  const kept = Math.ceil(n / 2);
  t.equal(result.added.length, n - kept, 'lines that still exist are not counted as added');
  t.equal(result.removed, n - kept);
  t.equal(result.added[0], 1 + (after[0]!.startsWith('old') ? 1 : 0));
});
