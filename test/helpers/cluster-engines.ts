import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Real etcd and nats-server clusters for the cluster tests, on loopback ports below 32768 (the
 * ephemeral range starts there: an outgoing connection may hold a port above it). Each member is a
 * child process with its own data directory; tests kill, pause and restart members by index.
 */

/**
 * `count` distinct free TCP ports in [10000, 32000) on `host`, each checked by binding it once and
 * reserved until this process exits: a port is checked free and bound later by a child, so two
 * callers (etcd and NATS start together; tap runs two test files at once) could otherwise both
 * take it. The reservation is a file per port under the temporary directory, created exclusively.
 */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const ports = new Set<number>();
  for (let tries = 0; ports.size < count; tries++) {
    if (tries > 100_000) throw new Error(`no ${count} free ports to reserve in ${reservationDir}`);
    const port = 10000 + Math.floor(Math.random() * 22000);
    if (ports.has(port) || !reservePort(port)) continue;
    if (await canBind(port, host)) ports.add(port);
    else releasePort(port);
  }
  return [...ports];
}

const reservationDir = join(tmpdir(), 'repohost-test-ports');
const reserved = new Set<string>();
let releasedAtExit = false;
/** A reservation this old whose holder is dead was left by a killed process (no exit hook ran). */
const STALE_MS = 10 * 60_000;

function reservePort(port: number): boolean {
  mkdirSync(reservationDir, { recursive: true });
  const file = join(reservationDir, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    dropIfStale(file);
    return false;
  }
  if (!releasedAtExit) process.once('exit', () => reserved.forEach((f) => rmSync(f, { force: true })));
  releasedAtExit = true;
  reserved.add(file);
  return true;
}

/** A reserved port another process (not a test's) is bound to: given back. */
function releasePort(port: number): void {
  const file = join(reservationDir, String(port));
  reserved.delete(file);
  rmSync(file, { force: true });
}

/**
 * Removes a reservation whose holder died long ago, so the port can be reserved again later (not
 * now: another process may be doing the same). An empty file is one being written: held.
 */
function dropIfStale(file: string): void {
  try {
    const holder = Number(readFileSync(file, 'utf8'));
    if (holder > 0 && !isAlive(holder) && Date.now() - statSync(file).mtimeMs > STALE_MS) rmSync(file, { force: true });
  } catch {
    // Released by its holder a moment ago.
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function canBind(port: number, host: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    // In use: another port is tried. Anything else (the host has no such address) is the caller's to see.
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(false) : reject(err)));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * Where the engines listen: loopback by default; a bridge address when repohost nodes run in
 * network namespaces (test/helpers/netns.ts), which cannot reach the host's loopback.
 */
export interface EngineOptions {
  listenHost?: string;
}

export interface EngineMember {
  name: string;
  process: ChildProcess | null;
  /** The last lines it wrote, for a failing test's diagnostics. */
  logs: string[];
}

export interface EngineCluster {
  members: EngineMember[];
  /** Client endpoints, one per member (etcd: `http://<host>:p`; NATS: `nats://<host>:p`). */
  endpoints: string[];
  /** SIGKILLs member `i`. */
  kill(i: number): Promise<void>;
  /** SIGSTOP / SIGCONT member `i`. */
  pause(i: number): void;
  resume(i: number): void;
  /** Starts member `i` again on its data directory and ports. */
  restart(i: number): Promise<void>;
  /** Index of the member that leads (etcd: the Raft leader; NATS: the JetStream meta leader). */
  leader(): Promise<number>;
  /** Kills every member and removes the data. */
  stop(): Promise<void>;
}

interface MemberSpec {
  name: string;
  command: string;
  args: string[];
  ready: () => Promise<boolean>;
}

async function launch(specs: MemberSpec[], dir: string, endpoints: string[], leaderOf: () => Promise<number>): Promise<EngineCluster> {
  const members: EngineMember[] = specs.map((s) => ({ name: s.name, process: null, logs: [] }));
  const start = (i: number): void => {
    const spec = specs[i]!;
    const member = members[i]!;
    const child = spawn(spec.command, spec.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      member.logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      if (member.logs.length > 200) member.logs.splice(0, member.logs.length - 200);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    member.process = child;
    child.once('exit', () => {
      if (member.process === child) member.process = null;
    });
  };
  const waitReady = async (indices: number[]): Promise<void> => {
    const deadline = Date.now() + 20_000;
    for (const i of indices) {
      while (!(await specs[i]!.ready().catch(() => false))) {
        if (Date.now() > deadline) throw new Error(`${specs[i]!.name} did not become ready:\n${members[i]!.logs.slice(-20).join('\n')}`);
        await sleep(100);
      }
    }
  };
  const killMember = async (i: number): Promise<void> => {
    const child = members[i]!.process;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  };
  specs.forEach((_, i) => start(i));
  try {
    await waitReady(specs.map((_, i) => i));
  } catch (err) {
    await Promise.all(specs.map((_, i) => killMember(i)));
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    members,
    endpoints,
    kill: killMember,
    pause: (i) => void members[i]!.process?.kill('SIGSTOP'),
    resume: (i) => void members[i]!.process?.kill('SIGCONT'),
    restart: async (i) => {
      await killMember(i);
      start(i);
      await waitReady([i]);
    },
    leader: leaderOf,
    // SIGKILL: a test's engines are thrown away, and etcd's graceful stop (a leader handing off
    // to peers that are stopping too) takes about 7 s per cluster.
    stop: async () => {
      await Promise.all(specs.map((_, i) => killMember(i)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A 3-member (by default) etcd cluster with the heartbeat and election timeouts the design uses
 * (100 ms / 1 s), so a leader kill is noticed in about a second.
 */
export async function startEtcd(opts: { members?: number } & EngineOptions = {}): Promise<EngineCluster> {
  const n = opts.members ?? 3;
  const host = opts.listenHost ?? '127.0.0.1';
  const dir = mkdtempSync(join(tmpdir(), 'repohost-etcd-'));
  const ports = await freePorts(2 * n, host);
  const client = (i: number): string => `http://${host}:${ports[2 * i]}`;
  const peer = (i: number): string => `http://${host}:${ports[2 * i + 1]}`;
  const initial = Array.from({ length: n }, (_, i) => `e${i}=${peer(i)}`).join(',');
  const token = `rh-${process.pid}-${ports[0]}`;
  const specs: MemberSpec[] = Array.from({ length: n }, (_, i) => ({
    name: `e${i}`,
    command: 'etcd',
    args: [
      '--name', `e${i}`,
      '--data-dir', join(dir, `e${i}`),
      '--listen-client-urls', client(i),
      '--advertise-client-urls', client(i),
      '--listen-peer-urls', peer(i),
      '--initial-advertise-peer-urls', peer(i),
      '--initial-cluster', initial,
      '--initial-cluster-token', token,
      '--initial-cluster-state', 'new',
      '--heartbeat-interval', '100',
      '--election-timeout', '1000',
      '--log-level', 'warn',
    ],
    ready: async () => (await etcdStatus(client(i))).leader !== '0',
  }));
  const endpoints = specs.map((_, i) => client(i));
  return launch(specs, dir, endpoints, async () => {
    for (let i = 0; i < n; i++) {
      const s = await etcdStatus(client(i)).catch(() => null);
      if (s && s.leader === s.member) return i;
    }
    return -1;
  });
}

/** The member's id and the leader it knows of, from the gRPC gateway (etcd 3.4 serves /v3/). */
async function etcdStatus(endpoint: string): Promise<{ member: string; leader: string }> {
  const res = await fetch(`${endpoint}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(1000) });
  const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
  return { member: body.header?.member_id ?? '', leader: body.leader ?? '0' };
}

/**
 * A 3-server (by default) NATS cluster with JetStream (file storage), each with a monitoring port
 * for readiness and leader lookups. Debian's nats-server 2.9 acknowledges before any fsync; the
 * tests see crash semantics (kill -9 keeps the page cache), not power loss.
 */
export async function startNats(opts: { servers?: number } & EngineOptions = {}): Promise<EngineCluster & { monitors: string[] }> {
  const n = opts.servers ?? 3;
  const host = opts.listenHost ?? '127.0.0.1';
  const dir = mkdtempSync(join(tmpdir(), 'repohost-nats-'));
  const ports = await freePorts(3 * n, host);
  const clientPort = (i: number): number => ports[3 * i]!;
  const routePort = (i: number): number => ports[3 * i + 1]!;
  const monitorPort = (i: number): number => ports[3 * i + 2]!;
  const routes = Array.from({ length: n }, (_, i) => `nats-route://${host}:${routePort(i)}`);
  const monitors = Array.from({ length: n }, (_, i) => `http://${host}:${monitorPort(i)}`);
  const specs: MemberSpec[] = Array.from({ length: n }, (_, i) => {
    const conf = join(dir, `n${i}.conf`);
    writeFileSync(
      conf,
      [
        `server_name: n${i}`,
        `listen: ${host}:${clientPort(i)}`,
        `http: ${host}:${monitorPort(i)}`,
        // Shard log records go up to 8 MiB (the streams' max_msg_size); the server default is 1 MiB.
        'max_payload: 8388608',
        `jetstream { store_dir: "${join(dir, `n${i}`)}" }`,
        n > 1 ? `cluster { name: rh, listen: ${host}:${routePort(i)}, routes: [${routes.filter((_, j) => j !== i).join(', ')}] }` : '',
      ].join('\n'),
    );
    return {
      name: `n${i}`,
      command: 'nats-server',
      args: ['-c', conf],
      ready: async () => (await jsz(monitors[i]!)).meta_cluster?.leader !== undefined || n === 1,
    };
  });
  const endpoints = specs.map((_, i) => `nats://${host}:${clientPort(i)}`);
  const cluster = await launch(specs, dir, endpoints, async () => {
    for (let i = 0; i < n; i++) {
      const z = await jsz(monitors[i]!).catch(() => null);
      if (z?.meta_cluster?.leader === `n${i}`) return i;
    }
    return -1;
  });
  return { ...cluster, monitors };
}

interface Jsz {
  meta_cluster?: { leader?: string };
}

async function jsz(monitor: string): Promise<Jsz> {
  const res = await fetch(`${monitor}/jsz`, { signal: AbortSignal.timeout(1000) });
  return (await res.json()) as Jsz;
}
