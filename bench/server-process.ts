/**
 * Processes under test: the repohost server (built by `npm run build`) and the uWS hello-world
 * baseline. Both print a JSON `"msg":"listening"` line with their port on stdout; everything they
 * print goes to a log file, which the orchestrator names when something fails.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { SigningKey } from './tokens.js';

const execFileAsync = promisify(execFile);

/** The checkout root: this file runs as dist/bench/server-process.js. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const SERVER_ENTRY = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const HELLO_ENTRY = fileURLToPath(new URL('./hello-server.js', import.meta.url));

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;

export interface RunningServer {
  url: string;
  host: string;
  port: number;
  metricsPort: number | null;
  logFile: string;
  pid: number;
  /** Null while it runs. */
  exitCode(): number | null;
  stop(): Promise<void>;
}

/** Where the server serves its Prometheus text, if it does. */
export function metricsUrlOf(server: RunningServer): string | null {
  return server.metricsPort === null ? null : `http://${server.host}:${server.metricsPort}/metrics`;
}

export function serverBuilt(): boolean {
  return existsSync(SERVER_ENTRY);
}

async function spawnListening(
  args: string[],
  env: NodeJS.ProcessEnv,
  logFile: string,
): Promise<RunningServer> {
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(logFile);
  // Piped for the whole life of the process: a server blocked on a full stdout pipe would be
  // benchmarked as slow.
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no "listening" line within ${READY_TIMEOUT_MS} ms (log: ${logFile})`));
    }, READY_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      pending += chunk.toString('utf8');
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (parsed['msg'] === 'listening') {
            cleanup();
            resolve(parsed);
            return;
          }
        } catch {
          // Not JSON: keep looking.
        }
      }
    };
    const onExit = (code: number | null): void => {
      cleanup();
      reject(new Error(`process exited with code ${code} before listening (log: ${logFile})`));
    };
    const cleanup = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
    };
    child.stdout?.on('data', onData);
    child.on('exit', onExit);
  }).catch((err: unknown) => {
    // Never leave a half-started server behind.
    if (child.exitCode === null) child.kill('SIGKILL');
    throw err;
  });

  const port = Number(listening['port']);
  if (!Number.isInteger(port) || port <= 0) {
    child.kill('SIGKILL');
    throw new Error(`"listening" line without a port: ${JSON.stringify(listening)}`);
  }
  const metrics = Number(listening['metrics_port']);
  const host = '127.0.0.1';
  return {
    url: `http://${host}:${port}`,
    host,
    port,
    metricsPort: Number.isInteger(metrics) && metrics > 0 ? metrics : null,
    logFile,
    pid: child.pid ?? -1,
    exitCode: () => child.exitCode,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      const code = await exited;
      clearTimeout(timer);
      log.end();
      if (code !== 0 && code !== null) {
        process.stderr.write(`[bench] warning: server exited with code ${code} on SIGTERM (log: ${logFile})\n`);
      }
    },
  };
}

export function startHelloServer(logFile: string): Promise<RunningServer> {
  return spawnListening([HELLO_ENTRY], process.env, logFile);
}

/** `port` 0 (the default) lets the server pick; `env` adds settings (a cluster node's). */
export function startRepohost(opts: { dataDir: string; workers: number; logFile: string; port?: number; env?: Record<string, string> }): Promise<RunningServer> {
  if (!serverBuilt()) throw new Error(`server not built: ${SERVER_ENTRY} is missing`);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // The webhook receiver and the git server of the benchmark live on loopback.
    REPOHOST_ALLOW_PRIVATE_WEBHOOKS: '1',
    REPOHOST_ALLOW_PRIVATE_UPSTREAMS: '1',
    ...opts.env,
  };
  const args = [
    SERVER_ENTRY,
    'serve',
    '--port',
    String(opts.port ?? 0),
    '--data',
    opts.dataDir,
    '--workers',
    String(opts.workers),
    '--metrics-addr',
    '127.0.0.1:0',
  ];
  return spawnListening(args, env, opts.logFile);
}

async function cli(args: string[], dataDir: string): Promise<Record<string, unknown>> {
  const { stdout } = await execFileAsync(
    process.execPath,
    [SERVER_ENTRY, ...args, '--data', dataDir, '--json'],
    { cwd: PROJECT_ROOT, maxBuffer: 16 * 1024 * 1024 },
  );
  const line = stdout.trim().split('\n').filter((l) => l.startsWith('{')).pop();
  if (!line) throw new Error(`repohost ${args.join(' ')}: no JSON on stdout`);
  return JSON.parse(line) as Record<string, unknown>;
}

/** Creates the benchmark org and an admin signing key with the CLI (API.md §13). */
export async function createOrgAndKey(dataDir: string, org: string): Promise<SigningKey> {
  await cli(['org', 'create', org], dataDir);
  const key = await cli(['key', 'create', '--org', org, '--scopes', 'admin', '--name', 'bench'], dataDir);
  const kid = key['id'];
  const jwk = key['private_key_jwk'];
  if (typeof kid !== 'string' || typeof jwk !== 'object' || jwk === null) {
    throw new Error('key create --json did not return id and private_key_jwk');
  }
  return { kid, org, privateJwk: jwk };
}
