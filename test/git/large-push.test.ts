import t from 'tap';
import { randomBytes } from 'node:crypto';
import { createWriteStream, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { cloneUrl, createRepo, gitClient } from './helpers.js';
import { sampleMemory } from './server-memory.js';

/**
 * A push of a 512 MiB file (API §14, the largest file §5.4 allows) is read as it arrives: the
 * server's anonymous memory grows by far less than the file while the pack is inflated, hashed,
 * checked and stored. The file is random, so the pack is as large as the file.
 */
const MiB = 1024 * 1024;
const SIZE = 512 * MiB;

const s = await serverForFile(t);
const git = gitClient(t);

t.test('git push - a 512 MiB file streams in: the server\'s anonymous memory grows by less than 128 MiB', { timeout: 900_000 }, async (t) => {
  await createRepo(s, 'bigpush');
  const token = await s.token({ scopes: ['write'] });
  const dir = join(git.dir, 'bigpush');
  await git.ok(['init', '--quiet', '-b', 'main', dir]);
  // Stored without compression: the random bytes would not shrink, and git would spend minutes trying.
  await git.ok(['config', 'core.compression', '0'], { cwd: dir });
  writeFileSync(join(dir, 'small.txt'), 'first\n');
  await git.ok(['add', '.'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'first'], { cwd: dir });
  // A first push starts the receive pool and loads the push code before the baseline.
  await git.ok(['push', '--quiet', cloneUrl(s, 'bigpush', token), 'HEAD:main'], { cwd: dir });

  const file = createWriteStream(join(dir, 'big.bin'));
  for (let i = 0; i < SIZE / MiB; i++) if (!file.write(randomBytes(MiB))) await once(file, 'drain');
  file.end();
  await once(file, 'finish');
  await git.ok(['add', 'big.bin'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', 'big'], { cwd: dir });
  const head = await git.ok(['rev-parse', 'HEAD'], { cwd: dir });

  const memory = sampleMemory(s.process.pid!);
  const started = Date.now();
  const res = await git.run(['push', '--quiet', cloneUrl(s, 'bigpush', token), 'HEAD:main'], { cwd: dir });
  const growth = await memory.stop();
  t.equal(res.status, 0, res.stderr);
  t.comment(`512 MiB push in ${((Date.now() - started) / 1000).toFixed(1)} s; server growth: ${growth.describe()}`);
  t.ok(growth.grew.anon < 128 * MiB, `the server's anonymous memory grew by ${(growth.grew.anon / MiB).toFixed(0)} MiB`);
  // A failed transfer was reported above; what follows would only fail again for the same reason.
  if (res.status !== 0) return;
  const main = await s.api('GET', `/${s.org}/bigpush/bookmarks/main`);
  const change = await s.api('GET', `/${s.org}/bigpush/changes/${main.json.change_id}`);
  t.equal(change.json.current_commit_oid, head, 'the bookmark shows the pushed commit');
  t.same(change.json.files, ['big.bin'], 'the change adds the file');
  const listed = await git.ok(['ls-remote', cloneUrl(s, 'bigpush', token), 'refs/heads/main']);
  t.equal(listed.split('\t')[0], head);
});
