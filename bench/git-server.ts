/**
 * A local git smart-HTTP server for the `sync` scenario: `git http-backend` behind a node:http
 * front (CGI), serving bare repositories from one directory. Plus a generator for a "large"
 * repository built with `git fast-import` (seconds for thousands of commits, no working tree).
 */
import { execFile, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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

export interface GitServer {
  url: string;
  close(): Promise<void>;
}

/** Serves every bare repository under `root` at `http://127.0.0.1:<port>/<name>`. */
export async function startGitServer(root: string): Promise<GitServer> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
        REMOTE_ADDR: req.socket.remoteAddress ?? '',
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(cgi.stdin);
    // CGI output: header lines, a blank line, then the body to stream through.
    let head = Buffer.alloc(0);
    let headerDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      let end = head.indexOf('\r\n\r\n');
      let sep = 4;
      if (end < 0) {
        end = head.indexOf('\n\n');
        sep = 2;
      }
      if (end < 0) return;
      headerDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = parseInt(value, 10);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + sep));
    });
    cgi.on('close', () => {
      if (!headerDone) res.writeHead(502);
      res.end();
    });
    cgi.on('error', () => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
