import t from 'tap';
import { join } from 'node:path';
import { serverForFile } from '../helpers/server.js';
import { gitClient, ROOT, write } from './helpers.js';

/**
 * The repository view's `clone_url` (API §4.1, §14): `REPOHOST_PUBLIC_URL` + `/{org}/{repo}.git`,
 * in every view of the repository, and a URL git clones from.
 */
const PUBLIC = 'https://git.example.test/base';
const s = await serverForFile(t, { env: { REPOHOST_PUBLIC_URL: `${PUBLIC}/` } });
const git = gitClient(t);

t.test('clone_url - every repository view names where git clones it', async (t) => {
  const created = await s.api('POST', '/acme/repos', { body: { name: 'Demo.Repo' } });
  t.equal(created.status, 201);
  const expected = `${PUBLIC}/acme/Demo.Repo.git`;
  t.equal(created.json.clone_url, expected, 'on create');
  t.equal((await s.api('GET', '/acme/Demo.Repo')).json.clone_url, expected, 'on read');
  const listed = await s.api('GET', '/acme/repos');
  t.equal(listed.json.repos.find((r: { name: string }) => r.name === 'Demo.Repo').clone_url, expected, 'in the list');
  const renamed = await s.api('PATCH', '/acme/Demo.Repo', { body: { name: 'demo' } });
  t.equal(renamed.json.clone_url, `${PUBLIC}/acme/demo.git`, 'after a rename, the new name');
});

t.test('clone_url - git clones from it', async (t) => {
  const tip = await write(s, 'demo', ROOT, { bookmark: 'main', files: { 'a.txt': 'a\n' } });
  const cloneUrl = (await s.api('GET', '/acme/demo')).json.clone_url as string;
  const token = await s.token({ scopes: ['read'] });
  // The public name of the server points at the test server, as a proxy in front of it would.
  const dir = join(git.dir, 'from-clone-url');
  await git.ok(['-c', `url.http://x:${token}@127.0.0.1:${s.port}/.insteadOf=${PUBLIC}/`, 'clone', '--quiet', cloneUrl, dir]);
  t.equal(await git.ok(['rev-parse', 'HEAD'], { cwd: dir }), tip.commit);
});
