import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer } from '../helpers/server.js';
import { startEnv, createTarget } from '../webhooks/setup.js';

/**
 * `repohost backup <dir>` (docs/operating.md, "Backup and restore"): an online copy of a data
 * directory that a server starts on, with every write acknowledged before the copy began and the
 * secret key that opens its sealed webhook secrets.
 */
const write = (path: string, content: string): Record<string, unknown> => ({ base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path, content }] });

t.test('backup - a copy taken under write load restores every write acknowledged before it, and its webhook secrets still sign', async (t) => {
  const e = await startEnv();
  const target = await createTarget(e, { events: ['change.created'] });
  const created = await e.s.api('POST', '/acme/repos', { body: { name: 'kept' } });
  t.equal(created.status, 201);

  // Writers keep going while the copy is taken; only writes answered before it starts must be in it.
  const acked: Array<{ path: string; change: string }> = [];
  let writing = true;
  let n = 0;
  const writers = Array.from({ length: 4 }, async () => {
    while (writing) {
      const path = `f${n++}.txt`;
      // A connection reset (a kept-alive socket closed as it was reused) is a write not acknowledged.
      const res = await e.s.api('POST', '/acme/kept/apply-ops', { body: write(path, `content of ${path}`) }).catch(() => null);
      if (res?.status === 201) acked.push({ path, change: res.json.change.id });
    }
  });
  while (acked.length < 20) await new Promise((r) => setTimeout(r, 10));
  const before = [...acked];
  const dir = join(mkdtempSync(join(tmpdir(), 'repohost-backup-')), 'copy');
  t.teardown(() => rmSync(join(dir, '..'), { recursive: true, force: true }));
  const res = await e.s.cli(['backup', dir, '--json']);
  writing = false;
  await Promise.all(writers);
  t.equal((await e.s.api('GET', '/acme/kept')).status, 200, 'the server still answers after the writers');
  t.equal(res.code, 0, res.stderr);
  const summary = JSON.parse(res.stdout);
  t.equal(summary.dir, dir);
  t.equal(summary.secret_key, true);
  t.ok(summary.bytes > 0);
  t.equal(statSync(join(dir, 'secret.key')).mode & 0o777, 0o600, 'the key stays private');
  t.equal(readFileSync(join(dir, 'secret.key'), 'utf8'), readFileSync(join(e.s.dataDir, 'secret.key'), 'utf8'));
  await e.close();

  const restored = await startTestServer({ dataDir: dir });
  t.teardown(async () => {
    await restored.stop();
    restored.cleanup();
  });
  const token = await restored.token();
  for (const { path, change } of before) {
    const read = await restored.api('GET', `/acme/kept/content?change_id=${change}&path=${path}`, { token });
    t.equal(read.status, 200, `${path} acknowledged before the backup is in it`);
    if (read.status !== 200) break;
    t.equal(Buffer.from(read.json.content, 'base64').toString(), `content of ${path}`);
  }
  const list = await restored.api('GET', '/acme/webhook-targets', { token });
  t.same(list.json.webhook_targets.map((x: { id: string }) => x.id), [target.id]);

  // A delivery from the restored server verifies with the secret the target was created with.
  const { startWebhookReceiver } = await import('../helpers/webhook-receiver.js');
  const rx = await startWebhookReceiver();
  t.teardown(() => rx.close());
  rx.setSecret(target.path, target.secret);
  const moved = await restored.api('PATCH', `/acme/webhook-targets/${target.id}`, { token, body: { url: rx.url(target.path) } });
  t.equal(moved.status, 200);
  t.equal((await restored.api('POST', '/acme/kept/apply-ops', { token, body: write('after.txt', 'x') })).status, 201);
  await rx.waitFor(() => rx.unique(target.path).length > 0, 15000, 'a verified delivery');
  t.ok(rx.received(target.path).every((d) => d.verified), 'signed with the original secret');
});

t.test('backup - refuses a target that is not empty, and writes nothing into it', async (t) => {
  const s = await startTestServer();
  t.teardown(async () => {
    await s.stop();
    s.cleanup();
  });
  const dir = mkdtempSync(join(tmpdir(), 'repohost-backup-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'something'), 'x');
  const res = await s.cli(['backup', dir]);
  t.equal(res.code, 1);
  t.match(res.stderr, /not empty/);
  t.throws(() => statSync(join(dir, 'db')), 'no db directory was made');
  const usage = await s.cli(['backup']);
  t.equal(usage.code, 1);
  t.match(usage.stderr, /usage: repohost backup <dir>/);
});
