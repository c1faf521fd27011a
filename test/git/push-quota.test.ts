import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { orgBytesUsed } from '../storage/storage-helpers.js';
import { openStorage } from '../../src/storage/database.js';
import { cloneUrl, createRepo, gitClient } from './helpers.js';

/**
 * A push whose pack is stored in several batches (over 2,000 objects) gets its shard's quota
 * allowance from the org between batches, through the receive thread's port to the main thread
 * (allowance-port.ts): it lands whole while the org has room, and once the org is full the next
 * such push is refused with git's message and leaves nothing counted.
 */
const QUOTA = 900_000;

const s = await serverForFile(t, { env: { REPOHOST_ORG_QUOTA_BYTES: String(QUOTA) } });
const git = gitClient(t);

/** A commit of 2,500 files of 100 random bytes in 25 directories (about 340 KB of objects). */
async function commitMany(dir: string, tag: string): Promise<void> {
  for (let d = 0; d < 25; d++) {
    mkdirSync(join(dir, `${tag}${d}`), { recursive: true });
    for (let f = 0; f < 100; f++) writeFileSync(join(dir, `${tag}${d}`, `f${f}.txt`), randomBytes(50).toString('hex'));
  }
  await git.ok(['add', '-A'], { cwd: dir });
  await git.ok(['commit', '--quiet', '-m', tag], { cwd: dir });
}

function orgBytes(orgId: string): number {
  const storage = openStorage(s.dataDir);
  try {
    return orgBytesUsed(storage.meta, orgId);
  } finally {
    void storage.close();
  }
}

t.test('git push quota - a pack of several batches refills its shard between them, and is refused whole once the org is full', async (t) => {
  const orgId = (await s.api('GET', `/${s.org}`)).json.id as string;
  await createRepo(s, 'many');
  const token = await s.token({ scopes: ['write'] });
  const dir = join(git.dir, 'many');
  await git.ok(['init', '--quiet', '-b', 'main', dir]);

  await commitMany(dir, 'a');
  const first = await git.run(['push', '--quiet', cloneUrl(s, 'many', token), 'HEAD:main'], { cwd: dir });
  t.equal(first.status, 0, first.stderr);
  await commitMany(dir, 'b');
  const second = await git.run(['push', '--quiet', cloneUrl(s, 'many', token), 'HEAD:main'], { cwd: dir });
  t.equal(second.status, 0, second.stderr);

  await s.stop();
  const afterTwo = orgBytes(orgId);
  t.ok(afterTwo > 600_000 && afterTwo <= QUOTA, `two pushes of about 340 KB are counted: ${afterTwo} bytes`);
  await s.restart();

  await commitMany(dir, 'c');
  const third = await git.run(['push', cloneUrl(s, 'many', token), 'HEAD:main'], { cwd: dir });
  t.not(third.status, 0, 'the third does not fit');
  t.match(third.stderr, /the org's storage quota is full/);
  await s.stop();
  t.equal(orgBytes(orgId), afterTwo, 'the refused push left nothing counted');
  await s.restart();
  t.notOk(s.logs.some((l) => /"level":"error"/.test(l)), 'nothing was logged as an error');
});
