import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Config } from './config.js';
import type { ClusterNode } from './cluster/cluster-node.js';
import { log, setLogLevel } from './log.js';
import { openStorage, type Storage } from './storage/database.js';
import { REPLICATION_ENV, serverStorage } from './storage/server-storage.js';
import { migrateOrgQuota } from './storage/quota-migration.js';
import { lockDataDir } from './storage/data-dir-lock.js';
import { SecretBox } from './storage/secret-box.js';
import { clearStaleReaders, oldestReaderLag } from './storage/lmdb-readers.js';
import { directoryLocation, openOrgDirectory } from './cluster/org-directory/open-org-directory.js';
import { RecordCache } from './storage/read/record-cache.js';
import { RepoActivity } from './actors/repo-activity.js';
import { ActorRuntime } from './actors/runtime.js';
import { configureWorkerHeaps } from './actors/worker-heap.js';
import { actorSettings } from './actors/settings.js';
import { SignaturePool } from './http/auth/signature-pool.js';
import { TokenVerifier } from './http/auth/token-verifier.js';
import { createFrontEnd } from './http/app.js';
import { Metrics } from './http/metrics.js';
import { routes } from './http/routes/index.js';
import { compileResponses } from './protocol/serializers.js';
import type { Services } from './http/services.js';
import { startSystemActors, type SystemActors } from './actors/system/index.js';
import { OwnedShards } from './actors/system/shard-ownership.js';
import { closeReadPools } from './actors/read-pool.js';
import { closeReceivePool } from './actors/receive-pool.js';

export interface RunningServer {
  port: number;
  metricsPort: number | null;
  services: Services;
  /** Graceful stop: stop accepting, finish in-flight work, flush, close. */
  stop(): Promise<void>;
}

/** How long a graceful stop waits for in-flight requests before it closes anyway. */
const SHUTDOWN_GRACE_MS = 30_000;
/** Leaving a cluster (lease lost): requests in flight get this long, the whole stop the next. */
const LEAVE_GRACE_MS = 2000;
const LEAVE_DEADLINE_MS = 15_000;

/** The operator listener: `/metrics`, and in cluster mode `/cluster/status` (this node's view, JSON). */
function listenOperator(metrics: Metrics, addr: string, cluster: ClusterNode | null): Promise<{ server: Server; port: number } | null> {
  if (!addr) return Promise.resolve(null);
  const i = addr.lastIndexOf(':');
  const host = addr.slice(0, i).replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
  const port = Number(addr.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`REPOHOST_METRICS_ADDR must be host:port, got ${JSON.stringify(addr)}`);
  const server = createServer((req, res) => {
    if (cluster && req.url === '/cluster/status') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(cluster.status()));
      return;
    }
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text),
      (err) => res.writeHead(500).end(String(err)),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

/** Parts a caller may bring instead of the ones the server makes. */
export interface ServerParts {
  /** Where token signatures are checked; a caller that must order a check passes one it controls. */
  signatures?: SignaturePool;
}

/** Starts the whole service on one data directory: storage, actors, front end, operator listener. */
export async function startServer(config: Config, parts: ServerParts = {}): Promise<RunningServer> {
  setLogLevel(config.logLevel);
  mkdirSync(config.dataDir, { recursive: true });
  const lock = await lockDataDir(config.dataDir);
  const opened = openStorage(config.dataDir);
  // A migration of this data directory's own layout, before anything is recorded.
  migrateOrgQuota(opened);
  // In cluster mode every thread (this one, and each started from here on) sends its writes to
  // the shard logs (cluster/replica/): set before the first thread exists.
  if (config.cluster) process.env[REPLICATION_ENV] = '1';
  const storage: Storage = serverStorage(opened);
  if (config.cluster) {
    if (!config.secretKey) throw new Error('setting REPOHOST_SECRET_KEY is required in cluster mode: every node seals and opens stored credentials with it');
    SecretBox.install(config.dataDir, config.secretKey);
  }
  const secrets = SecretBox.forDataDir(config.dataDir);
  const orgDirectory = await openOrgDirectory(storage, directoryLocation(config), config.cluster ? secrets.fingerprint() : undefined);
  const { directory } = orgDirectory;
  compileResponses();
  configureWorkerHeaps();
  let metrics: Metrics | null = null;
  const records = new RecordCache(storage.meta);
  const activity = new RepoActivity();
  const served = new OwnedShards();
  const runtime = new ActorRuntime({
    workers: config.workers,
    settings: actorSettings(config),
    mailboxLimit: config.mailboxLimit,
    commandsModule: fileURLToPath(new URL('./actors/commands/index.js', import.meta.url)),
    onBatch: (stats) => metrics?.observeBatch(stats),
    onDispatched: (actor) => records.dispatched(actor),
    onSettled: (actor) => {
      storage.root.resetReadTxn();
      records.settled(actor);
      activity.settled(actor);
    },
  });
  const signatures = parts.signatures ?? new SignaturePool();
  const verifier = new TokenVerifier(directory, { audiences: config.jwtAudiences, maxTtlS: config.jwtMaxTtlS }, signatures);
  metrics = new Metrics(
    () => runtime.mailboxDepths(),
    () => storage.root.getStats(),
    () => ({ ...signatures.stats, waiting: verifier.waiting }),
    () => oldestReaderLag(storage.root),
  );
  // Set once every part is up: a lease lost before then cannot stop them in order.
  let stop: ((graceMs: number) => Promise<void>) | null = null;
  /**
   * Ends the process with `code` after a stop. process.exit() alone terminates worker threads
   * wherever they are, and one inside a synchronous LMDB transaction then deadlocks in lmdb-js's
   * clean-up (its thread waits on a lock it holds; exit waits for the thread), so the process
   * never ends. The stop lets each pool finish its running tasks and closes every worker thread
   * first. A stop that fails or outlasts LEAVE_DEADLINE_MS, or a lease lost during start-up, ends
   * in SIGKILL, which loses nothing acknowledged.
   */
  const leave = (code: number): void => {
    const kill = (): void => void process.kill(process.pid, 'SIGKILL');
    // A SIGTERM stop already under way exits with this code too (the CLI exits with exitCode).
    process.exitCode = code;
    if (!stop) {
      log.error('leaving during start-up: killed');
      return kill();
    }
    setTimeout(kill, LEAVE_DEADLINE_MS);
    stop(LEAVE_GRACE_MS).then(
      () => process.exit(code),
      (err: unknown) => {
        log.error('the stop before leaving failed: killed', { err });
        kill();
      },
    );
  };
  let cluster: ClusterNode | null = null;
  if (config.cluster) {
    const { startClusterNode, LEASE_LOST_EXIT } = await import('./cluster/cluster-node.js');
    const onLeaseLost = (): void => leave(LEASE_LOST_EXIT);
    cluster = await startClusterNode({ cluster: config.cluster, storage: opened, dataDir: config.dataDir, runtime, records, registry: metrics.registry, onServed: (shards) => served.set(shards), onLeaseLost });
  }
  const forwarding = cluster?.forwarding ?? null;
  const services: Services = { config, storage, directory, records, activity, served, secrets, runtime: forwarding?.actors ?? runtime, verifier, metrics, forwarding: forwarding?.requests ?? null, shardReads: forwarding?.reads ?? null, readFence: cluster?.readFence ?? null };
  const front = createFrontEnd(services, routes);
  const port = await front.listen(config.host, config.port);
  const operator = await listenOperator(metrics, config.metricsAddr, cluster);
  const system: SystemActors = startSystemActors(services);
  log.info('listening', { port, metrics_port: operator?.port ?? null, workers: config.workers, data: config.dataDir });

  let stopping: Promise<void> | null = null;
  async function stopAll(graceMs: number): Promise<void> {
    front.stopListening();
    // A client that never finishes sending its body must not hold the shutdown forever.
    await Promise.race([front.idle(), new Promise((r) => setTimeout(r, graceMs).unref())]);
    await system.stop();
    await Promise.all([runtime.close(), closeReadPools(config.dataDir), closeReceivePool(config.dataDir)]);
    await cluster?.close();
    await orgDirectory.close();
    await signatures.close();
    await storage.root.flushed;
    staleReaders.stop();
    operator?.server.close();
    await storage.close();
    lock.release();
  }
  const stopOnce = (graceMs: number): Promise<void> => (stopping ??= stopAll(graceMs));
  stop = stopOnce;
  // Started with everything up, so that a failed start leaves no timer on a closed store.
  const staleReaders = clearStaleReaders(storage.root);

  return {
    port,
    metricsPort: operator?.port ?? null,
    services,
    stop: () => stopOnce(SHUTDOWN_GRACE_MS),
  };
}
