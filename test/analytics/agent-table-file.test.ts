import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer } from '../helpers/server.js';

const ROOT = 'z'.repeat(32);

t.test('agent table file - REPOHOST_AGENT_TABLE replaces the built-in identities', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'repohost-agent-table-'));
  const file = join(dir, 'agents.json');
  writeFileSync(file, JSON.stringify({ include_defaults: false, agents: [{ provider: 'Acme Bot', model: 'acme-1', emails: ['bot@acme.test'] }] }));
  const s = await startTestServer({ env: { REPOHOST_AGENT_TABLE: file } });
  t.teardown(async () => {
    await s.stop();
    s.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'bots' } })).status, 201);
  const write = async (base: string, path: string, author: [string, string]) => {
    const res = await s.api('POST', '/acme/bots/apply-ops', {
      token: await s.token({ author: [author] }),
      body: { base_change_id: base, bookmarks: [{ name: 'main' }], ops: [{ op: 'write', path, content: 'one\ntwo\n' }] },
    });
    t.equal(res.status, 201, res.text);
    return res.json.change.id as string;
  };
  const first = await write(ROOT, 'bot.txt', ['Acme Bot', 'bot@acme.test']);
  await write(first, 'claude.txt', ['Claude', 'noreply@anthropic.com']);
  const deadline = Date.now() + 20_000;
  let res = await s.api('GET', '/acme/bots/analytics');
  while (!(res.json.status === 'current' && res.json.analytics.summary.totalLines === 4) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    res = await s.api('GET', '/acme/bots/analytics');
  }
  t.equal(res.json.status, 'current');
  const { totalLines, aiLines, humanLines, providers, models } = res.json.analytics.summary;
  t.same({ totalLines, aiLines, humanLines, providers, models }, { totalLines: 4, aiLines: 2, humanLines: 2, providers: { acme_bot: 2 }, models: { 'acme-1': 2 } }, 'Claude is not an agent without the defaults');
});
