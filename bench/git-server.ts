/**
 * The upstream of the `sync` scenario: a "large" bare repository built with `git fast-import`
 * (seconds for thousands of commits, no working tree), served by the same `git http-backend`
 * bridge the tests use.
 */
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { agentFileContent } from './agent-files.js';

const execFileAsync = promisify(execFile);

export async function gitAvailable(): Promise<boolean> {
  try {
    await execFileAsync('git', ['--version']);
    return true;
  } catch {
    return false;
  }
}

export interface LargeRepo {
  name: string;
  branch: string;
  head: string;
  commits: number;
  files: number;
}

/**
 * `commits` commits on `main`, each adding or rewriting `filesPerCommit` files of ~1 KiB spread
 * over 32 directories, so trees are deep enough to matter.
 */
export async function createLargeRepo(
  root: string,
  name: string,
  opts: { commits: number; filesPerCommit: number },
): Promise<LargeRepo> {
  const gitDir = join(root, name);
  await execFileAsync('git', ['init', '--quiet', '--bare', '--initial-branch=main', gitDir]);
  const child = spawn('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const done = new Promise<void>((resolve, reject) => {
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`git fast-import failed (${code}): ${stderr}`))));
  });
  const paths = new Set<string>();
  const start = 1_700_000_000;
  let mark = 0;
  for (let c = 0; c < opts.commits; c++) {
    let chunk = '';
    const blobs: Array<[number, string]> = [];
    for (let f = 0; f < opts.filesPerCommit; f++) {
      // Half new files, half rewrites of earlier ones: history and tree both grow.
      const n = f % 2 === 0 || c === 0 ? c * opts.filesPerCommit + f : (c * 7919 + f) % (c * opts.filesPerCommit);
      const path = `dir-${n % 32}/sub-${n % 5}/file-${n}.txt`;
      paths.add(path);
      const data = agentFileContent(n, c, f, 1024);
      chunk += `blob\nmark :${++mark}\ndata ${Buffer.byteLength(data)}\n${data}\n`;
      blobs.push([mark, path]);
    }
    const message = `commit ${c}\n`;
    chunk += `commit refs/heads/main\nmark :${++mark}\ncommitter Bench <bench@example.com> ${start + c * 60} +0000\n`;
    chunk += `data ${Buffer.byteLength(message)}\n${message}`;
    for (const [m, path] of blobs) chunk += `M 100644 :${m} ${path}\n`;
    chunk += '\n';
    if (!child.stdin.write(chunk)) await new Promise((r) => child.stdin.once('drain', r));
  }
  child.stdin.end();
  await done;
  const { stdout } = await execFileAsync('git', ['--git-dir', gitDir, 'rev-parse', 'refs/heads/main']);
  return { name, branch: 'main', head: stdout.trim(), commits: opts.commits, files: paths.size };
}

export { startGitServer, type GitServer } from '../test/helpers/git-server.js';

/**
 * Adds one commit to `branch` of the bare repository `<name>` under `root`, writing `path`, with
 * git's plumbing (no work tree): the upstream moving on by one commit, for an incremental fetch.
 */
export async function appendCommit(root: string, name: string, opts: { branch: string; path: string; content: string; message: string }): Promise<string> {
  const gitDir = join(root, name);
  const env = { ...process.env, GIT_INDEX_FILE: join(gitDir, 'bench-index'), GIT_AUTHOR_NAME: 'Bench', GIT_AUTHOR_EMAIL: 'bench@example.com', GIT_COMMITTER_NAME: 'Bench', GIT_COMMITTER_EMAIL: 'bench@example.com' };
  const git = async (args: string[], input?: string): Promise<string> => {
    if (input === undefined) return (await execFileAsync('git', ['--git-dir', gitDir, ...args], { env })).stdout.trim();
    return new Promise((resolve, reject) => {
      const child = spawn('git', ['--git-dir', gitDir, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`git ${args.join(' ')} exited ${code}`))));
      child.stdin.end(input);
    });
  };
  const blob = await git(['hash-object', '-w', '--stdin'], opts.content);
  await git(['read-tree', opts.branch]);
  await git(['update-index', '--add', '--cacheinfo', `100644,${blob},${opts.path}`]);
  const tree = await git(['write-tree']);
  const commit = await git(['commit-tree', tree, '-p', opts.branch, '-m', opts.message]);
  await git(['update-ref', `refs/heads/${opts.branch}`, commit]);
  return commit;
}
