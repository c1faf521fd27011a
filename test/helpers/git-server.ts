import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A real git smart-HTTP server for tests: git's own `git http-backend` (CGI) behind a node:http
 * server on loopback, serving the bare repositories of a temporary directory. HTTP Basic auth is
 * enforced on every request. Controls let a test take the server down (connections refused),
 * answer 5xx for the next N requests, hold requests until released, slow every request, or
 * misbehave on chosen requests (slow, reset, cut short, garbage).
 */
const execFileAsync = promisify(execFile);
const HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';

export interface GitRequestRecord {
  method: string;
  path: string;
  service: string | null;
  status: number;
  user: string | null;
}

/**
 * What the server does wrong with one request: wait `delayMs` first, then (with `kind`) drop the
 * connection unanswered (`reset`), drop it after the first chunk of the real answer (`truncate`),
 * answer 200 with random bytes in the service's content type (`garbage`), or answer 503
 * without reaching git (`unavailable`).
 */
export interface GitFault {
  delayMs?: number;
  kind?: 'reset' | 'truncate' | 'garbage' | 'unavailable';
}

export interface GitServer {
  /** `http://127.0.0.1:<port>` — a repository is at `${url}/<name>.git`. */
  readonly url: string;
  readonly root: string;
  /** Every request answered (in order), for counting fetches and pushes. */
  readonly requests: GitRequestRecord[];
  /** Creates an empty bare repository `<name>.git` (default branch `main`) and returns its URL. */
  createRepo(name: string): Promise<string>;
  /** Runs git with `--git-dir` set to the bare repository `<name>.git`; returns trimmed stdout. */
  git(name: string, args: string[], opts?: { input?: string; env?: Record<string, string> }): Promise<string>;
  /** Runs git in any directory (for work trees). */
  gitIn(cwd: string, args: string[], opts?: { input?: string; env?: Record<string, string> }): Promise<string>;
  /** Stops listening: new connections are refused until `up()`. */
  down(): Promise<void>;
  up(): Promise<void>;
  /** The next `n` requests are answered with `status` (default 503) without reaching git. */
  failNext(n: number, status?: number): void;
  /** Requests matching `match` wait until `release()` (resolves `held` when one arrives). */
  hold(match: (req: { method: string; path: string; service: string | null }) => boolean): { held: Promise<void>; release(): void };
  /** Every request waits this long before it is served. */
  setDelay(ms: number): void;
  /** Decides a fault for each request (null: none) until called again with null. */
  misbehave(decide: ((req: { method: string; path: string; service: string | null }) => GitFault | null) | null): void;
  close(): Promise<void>;
}

export interface GitServerOptions {
  /** Accepted Basic credentials: username → password. Omitted: no authentication. */
  users?: Record<string, string>;
  /** Serve the bare repositories already in this directory (left in place on close). */
  root?: string;
}

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Test Author',
  GIT_AUTHOR_EMAIL: 'author@example.com',
  GIT_COMMITTER_NAME: 'Test Committer',
  GIT_COMMITTER_EMAIL: 'committer@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
};

async function runGit(cwd: string | undefined, args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<string> {
  if (opts.input === undefined) {
    const { stdout } = await execFileAsync('git', args, { cwd, env: { ...process.env, ...GIT_ENV, ...opts.env }, maxBuffer: 64 * 1024 * 1024 });
    return stdout.trim();
  }
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, env: { ...process.env, ...GIT_ENV, ...opts.env } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`git ${args.join(' ')} failed (${code}): ${err}`))));
    child.stdin.end(opts.input);
  });
}

function parseBasic(header: string | undefined): { user: string; password: string } | null {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export async function startGitServer(opts: GitServerOptions): Promise<GitServer> {
  const root = opts.root ?? mkdtempSync(join(tmpdir(), 'repohost-git-'));
  const requests: GitRequestRecord[] = [];
  const sockets = new Set<Socket>();
  let failures: { left: number; status: number } = { left: 0, status: 503 };
  let delayMs = 0;
  let decideFault: ((req: { method: string; path: string; service: string | null }) => GitFault | null) | null = null;
  const holds: Array<{ match: (r: { method: string; path: string; service: string | null }) => boolean; arrived: () => void; gate: Promise<void> }> = [];

  const running = new Set<ChildProcess>();
  /**
   * Ends a CGI still running, with the upload-pack or receive-pack it started: killing
   * http-backend alone left its child holding the pipes, and those kept the test process alive.
   */
  const stopCgi = (cgi: ChildProcess): void => {
    if (cgi.exitCode !== null || cgi.signalCode !== null) return;
    try {
      process.kill(-cgi.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    cgi.stdin?.destroy();
    cgi.stdout?.destroy();
  };

  const server = http.createServer((req, res) => {
    void serve(req, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const service = url.searchParams.get('service') ?? (/\/(git-upload-pack|git-receive-pack)$/.exec(url.pathname)?.[1] ?? null);
    const method = req.method ?? 'GET';
    const record = (status: number, user: string | null): void => {
      requests.push({ method, path: url.pathname, service, status, user });
    };
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    const fault = decideFault?.({ method, path: url.pathname, service }) ?? null;
    if (fault?.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
    if (fault?.kind === 'reset') {
      record(0, null);
      req.socket.destroy();
      return;
    }
    if (fault?.kind === 'unavailable') {
      record(503, null);
      req.resume();
      res.writeHead(503, { 'content-type': 'text/plain' }).end('temporarily unavailable\n');
      return;
    }
    if (fault?.kind === 'garbage') {
      record(200, null);
      req.resume();
      const kind = method === 'GET' ? `${service}-advertisement` : `${service}-result`;
      res.writeHead(200, { 'content-type': `application/x-${kind}` }).end(randomBytes(64 + Math.floor(Math.random() * 4096)));
      return;
    }
    for (const h of holds) {
      if (h.match({ method, path: url.pathname, service })) {
        h.arrived();
        await h.gate;
      }
    }
    if (failures.left > 0) {
      failures.left--;
      record(failures.status, null);
      req.resume();
      res.writeHead(failures.status, { 'content-type': 'text/plain' }).end('temporarily unavailable\n');
      return;
    }
    const creds = parseBasic(req.headers.authorization);
    if (opts.users && (!creds || opts.users[creds.user] !== creds.password)) {
      record(401, null);
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-type': 'text/plain' }).end('authentication required\n');
      return;
    }
    const cgi = spawn(HTTP_BACKEND, [], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_NOSYSTEM: '1',
        HOME: root,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: method,
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
        REMOTE_ADDR: req.socket.remoteAddress ?? '',
        // http-backend enables receive-pack for authenticated users.
        REMOTE_USER: creds?.user ?? 'anonymous',
      },
      stdio: ['pipe', 'pipe', 'ignore'],
      // Its own process group, so that stopping it also stops the git it started.
      detached: true,
    });
    running.add(cgi);
    cgi.once('close', () => running.delete(cgi));
    // A client gone mid-request (killed, or cut off here) leaves git waiting for the rest of
    // the body: it is stopped, and its closed stdin must not become an unhandled EPIPE.
    cgi.stdin.on('error', () => undefined);
    res.on('close', () => stopCgi(cgi));
    req.pipe(cgi.stdin);
    // The client sees a real answer break off after its headers; git's output is thrown away.
    const cutShort = (): void => {
      cgi.stdout.removeAllListeners('data');
      cgi.stdout.resume();
      req.socket.destroy();
    };
    // CGI output: header lines, a blank line, then the body to stream through.
    let head = Buffer.alloc(0);
    let headerDone = false;
    let status = 200;
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
      if (fault?.kind === 'truncate') cutShort();
    });
    cgi.on('close', () => {
      if (!headerDone) {
        status = 502;
        res.writeHead(502);
      }
      record(status, creds?.user ?? null);
      res.end();
    });
    cgi.on('error', () => {
      record(500, creds?.user ?? null);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  }

  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(0);
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    root,
    requests,
    async createRepo(name) {
      await runGit(undefined, ['init', '--quiet', '--bare', '--initial-branch=main', join(root, `${name}.git`)]);
      return `${url}/${name}.git`;
    },
    git: (name, args, o) => runGit(undefined, ['--git-dir', join(root, `${name}.git`), ...args], o),
    gitIn: (cwd, args, o) => runGit(cwd, args, o),
    async down() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
    async up() {
      await listen(port);
    },
    failNext(n, status = 503) {
      failures = { left: n, status };
    },
    hold(match) {
      let arrived!: () => void;
      let release!: () => void;
      const held = new Promise<void>((r) => (arrived = r));
      const gate = new Promise<void>((r) => (release = r));
      const entry = { match, arrived, gate };
      holds.push(entry);
      return {
        held,
        release() {
          holds.splice(holds.indexOf(entry), 1);
          release();
        },
      };
    },
    setDelay(ms) {
      delayMs = ms;
    },
    misbehave(decide) {
      decideFault = decide;
    },
    async close() {
      for (const cgi of running) stopCgi(cgi);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
      if (!opts.root) rmSync(root, { recursive: true, force: true });
    },
  };
}
