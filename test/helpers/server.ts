import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { openStorage, type Storage } from '../../src/storage/database.js';
import { createOrg, createSigningKey } from '../../src/storage/admin-store.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import './child-env.js';

/**
 * Starts a real repohost server (the compiled CLI, `serve`) in a child process on a random port
 * with a temporary data directory, and mints tokens for it. Tests drive it over HTTP.
 */
export const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface TokenOptions {
  scopes?: string[];
  repos?: string[];
  repo_ids?: string[];
  author?: Array<[string, string | null]>;
  ttl?: number;
  audience?: string;
  iat?: number;
  kid?: string | null;
  /** Embed the public JWK instead of `kid`. */
  embedJwk?: boolean;
  key?: TestKey;
  issuer?: string;
  extra?: Record<string, unknown>;
}

export interface TestKey {
  id: string;
  privateKey: KeyObject;
  publicX: string;
}

export interface TestServer {
  url: string;
  port: number;
  metricsUrl: string | null;
  dataDir: string;
  org: string;
  key: TestKey;
  logs: string[];
  process: ChildProcess;
  /** A token signed by the default key (admin unless scopes given). */
  token(opts?: TokenOptions): Promise<string>;
  /** Creates another signing key directly in the data directory (like the CLI does). */
  createKey(opts: { scopes: string[]; repos?: string[]; name?: string; org?: string }): TestKey;
  createOrg(slug: string): void;
  /** fetch against the API with a token; `path` starts after `/v1`. */
  api(method: string, path: string, opts?: ApiOptions): Promise<ApiReply>;
  stop(): Promise<number | null>;
  kill(): Promise<void>;
  /** Restarts a stopped or killed server on the same data directory (new port); `env` replaces the start's. */
  restart(env?: Record<string, string>): Promise<void>;
  cleanup(): void;
  /** Runs the real CLI (`node dist/src/cli/main.js … --data <dataDir>`) in its own process. */
  cli(args: string[], env?: Record<string, string>): Promise<CliResult>;
  /** The Prometheus text of the operator listener. */
  metrics(): Promise<string>;
}

/** A token signed by `key` for `org`, as an SDK would sign it (admin unless scopes given). */
export function signToken(key: TestKey, org: string, t: TokenOptions = {}): Promise<string> {
  const claims: Record<string, unknown> = { scopes: t.scopes ?? ['admin'], ...t.extra };
  if (t.repos) claims.repos = t.repos;
  if (t.repo_ids) claims.repo_ids = t.repo_ids;
  if (t.author) claims.author = t.author;
  const iat = t.iat ?? Math.floor(Date.now() / 1000);
  const header = t.embedJwk ? { alg: 'EdDSA', jwk: { kty: 'OKP', crv: 'Ed25519', x: key.publicX } } : { alg: 'EdDSA', kid: t.kid === undefined ? key.id : t.kid ?? undefined };
  return new SignJWT(claims)
    .setProtectedHeader(header)
    .setIssuer(t.issuer ?? org)
    .setAudience(t.audience ?? 'repohost')
    .setIssuedAt(iat)
    .setExpirationTime(iat + (t.ttl ?? 3600))
    .sign(key.privateKey);
}

export interface ApiOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
  raw?: string | Uint8Array;
  signal?: AbortSignal;
}

export interface ApiReply {
  status: number;
  headers: Headers;
  json: any;
  text: string;
}

/** fetch against the API of the server at `baseUrl` with `token` (if any); `path` starts after `/v1`. */
export async function apiRequest(baseUrl: string, token: string, method: string, path: string, o: ApiOptions = {}): Promise<ApiReply> {
  const headers: Record<string, string> = { ...o.headers };
  if (token) headers.authorization = `Bearer ${token}`;
  let body: string | Uint8Array | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${baseUrl}/v1${path}`, { method, headers, body, signal: o.signal });
  const text = await res.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, json, text };
}

export interface CliResult {
  code: number;
  /** The signal that ended the command (SIGTERM when `timeoutMs` ran out), or null. */
  signal: string | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the compiled CLI with `args` in a child process and collects its output. A command still
 * running after `timeoutMs` (a server that should have refused to start) is killed.
 */
export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 0): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, signal: err?.signal ?? null, stdout, stderr });
    });
  });
}

export interface StartOptions {
  env?: Record<string, string>;
  workers?: number;
  dataDir?: string;
  org?: string;
  /** The public port (default: any free one). */
  port?: number;
  /** The address both listeners bind (default 127.0.0.1; a node in a network namespace binds its own). */
  host?: string;
  /** Starts the server process (default: `spawn`); e.g. inside a network namespace (test/helpers/netns.ts). */
  spawnVia?: (command: string, args: string[], opts: SpawnOptions) => ChildProcess;
  /** An admin key the data directory already has: the server starts on the directory as it is. */
  key?: TestKey;
}

function withDirectory<T>(dataDir: string, fn: (d: LmdbOrgDirectory, s: Storage) => T): T {
  const storage = openStorage(dataDir);
  try {
    return fn(new LmdbOrgDirectory(storage), storage);
  } finally {
    void storage.close();
  }
}

/** Creates a signing key directly in the data directory (like the CLI does). */
export function createTestKey(dataDir: string, o: { scopes: string[]; repos?: string[]; name?: string; org: string }): TestKey {
  return withDirectory(dataDir, (d, s) => {
    const created = createSigningKey(d, s, o.org, { scopes: o.scopes, repos: o.repos, name: o.name });
    return { id: created.record.id, privateKey: createPrivateKey(created.privateKeyPem), publicX: created.record.public_jwk.x };
  });
}

async function launch(dataDir: string, opts: StartOptions, logs: string[]): Promise<{ child: ChildProcess; port: number; metricsPort: number | null }> {
  const host = opts.host ?? '127.0.0.1';
  const child = (opts.spawnVia ?? spawn)(process.execPath, [CLI, 'serve', '--port', String(opts.port ?? 0), '--host', host, '--data', dataDir, '--metrics-addr', `${host}:0`, '--workers', String(opts.workers ?? 2)], {
    env: { ...process.env, LOG_LEVEL: 'info', REPOHOST_ALLOW_PRIVATE_WEBHOOKS: '1', REPOHOST_ALLOW_PRIVATE_UPSTREAMS: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.on('data', (d: Buffer) => logs.push(d.toString()));
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    // Generous: on a machine loaded by parallel test files a start has taken over 20 s.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start within 60 s:\n${logs.join('')}`));
    }, 60_000);
    rl.on('line', (line) => {
      logs.push(line);
      if (line.includes('"msg":"listening"')) {
        clearTimeout(timer);
        const rec = JSON.parse(line) as { port: number; metrics_port: number | null };
        resolve({ child, port: rec.port, metricsPort: rec.metrics_port });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${logs.join('\n')}`));
    });
  });
}

export async function startTestServer(opts: StartOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'repohost-test-'));
  const org = opts.org ?? 'acme';
  const logs: string[] = [];
  const makeKey = (o: { scopes: string[]; repos?: string[]; name?: string; org?: string }): TestKey => createTestKey(dataDir, { ...o, org: o.org ?? org });
  if (!opts.key) {
    withDirectory(dataDir, (d) => {
      try {
        createOrg(d, org, `${org} inc`);
      } catch {
        // already there (restart on an existing data directory)
      }
    });
  }
  const key = opts.key ?? makeKey({ scopes: ['admin'], name: 'test-admin' });
  let { child, port, metricsPort } = await launch(dataDir, opts, logs);

  const server: TestServer = {
    get url() {
      return `http://${opts.host ?? '127.0.0.1'}:${port}`;
    },
    get port() {
      return port;
    },
    get metricsUrl() {
      return metricsPort ? `http://${opts.host ?? '127.0.0.1'}:${metricsPort}/metrics` : null;
    },
    dataDir,
    org,
    key,
    logs,
    get process() {
      return child;
    },
    token(t: TokenOptions = {}) {
      return signToken(t.key ?? key, org, t);
    },
    createKey: makeKey,
    createOrg(slug) {
      withDirectory(dataDir, (d) => createOrg(d, slug));
    },
    async api(method, path, o = {}) {
      return apiRequest(server.url, o.token ?? (await server.token()), method, path, o);
    },
    stop() {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      });
    },
    kill() {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
    },
    async restart(env) {
      ({ child, port, metricsPort } = await launch(dataDir, env ? { ...opts, env } : opts, logs));
    },
    cleanup() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    },
    cli(args, env) {
      return runCli([...args, '--data', dataDir], env);
    },
    async metrics() {
      if (!server.metricsUrl) throw new Error('the operator listener is disabled');
      const res = await fetch(server.metricsUrl);
      return res.text();
    },
  };
  return server;
}

/** One server for a whole test file, stopped and removed when the file's tests end. */
export async function serverForFile(tap: { teardown(fn: () => Promise<void>): void }, opts: StartOptions = {}): Promise<TestServer> {
  const server = await startTestServer(opts);
  tap.teardown(async () => {
    await server.stop();
    server.cleanup();
  });
  return server;
}
