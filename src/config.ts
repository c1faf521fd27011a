import { cpus } from 'node:os';
import { resolve } from 'node:path';

/**
 * Every operator setting of API §13, read once at start-up. Each environment variable can also be
 * given as a `serve` flag (`--workers 4` ≡ `REPOHOST_WORKERS=4`); flags win.
 */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  workers: number;
  metricsAddr: string;
  publicUrl: string;
  brand: string;
  jwtAudiences: string[];
  jwtMaxTtlS: number;
  mailboxLimit: number;
  keyRateLimit: number;
  jsonContentLimit: number;
  orgQuotaBytes: number;
  /** Free bytes the data directory's disk must keep after a large body is stored (see disk-room.ts). */
  minFreeBytes: number;
  /** Seconds an uploaded blob (or staged chunks) may stay unreferenced before it is collected. */
  blobRetentionS: number;
  /** Seconds after which an unfinished repository create, rename or delete is settled by the sweeper. */
  sagaTimeoutS: number;
  allowPrivateWebhooks: boolean;
  allowPrivateUpstreams: boolean;
  webhookRetryBaseMs: number;
  syncRetryBaseMs: number;
  syncConcurrency: number;
  /** Largest pack one git push may send (API §14). */
  maxPushBytes: number;
  agentTable: string;
  logLevel: string;
  /**
   * REPOHOST_SECRET_KEY: the key that seals stored credentials (`secret-box.ts`), base64 of 32
   * bytes, shared by every node of a cluster (required there); null keeps `<data>/secret.key`.
   * Read from the environment only: a flag would show it in the process list.
   */
  secretKey: string | null;
  /** Cluster mode (docs/design.md, "Cluster mode"); null runs the single node with no dependency. */
  cluster: ClusterConfig | null;
}

export type ShardLogBackend = 'jetstream' | 'etcd';

export interface ClusterConfig {
  /** Prefix of every etcd key and NATS stream of this cluster, so clusters can share engines. */
  name: string;
  etcd: string[];
  nats: string[];
  nodeId: string;
  /** This node's public URL (clients, and streamed uploads proxied from other nodes). */
  nodeUrl: string;
  /** This node's listener for actor messages forwarded by other nodes (HTTP/2), e.g. http://10.0.0.5:9100. */
  internalUrl: string;
  leaseTtlS: number;
  /** Copies of each shard: the owner plus replicas - 1 followers. */
  replicas: number;
  shardLog: ShardLogBackend;
  /** Copies the log engine keeps of each JetStream stream (3; 1 for a one-server dev NATS). */
  shardLogReplicas: number;
  rebalanceMaxMoves: number;
  rebalanceStableS: number;
  /** Entries an owner appends to a shard's log between two trims of it (0: never trims; replica/log-trim.ts). */
  logTrimEntries: number;
}

const SETTINGS: Array<[keyof Config, string, string]> = [
  ['port', 'PORT', 'port'],
  ['host', 'HOST', 'host'],
  ['dataDir', 'REPOHOST_DATA', 'data'],
  ['workers', 'REPOHOST_WORKERS', 'workers'],
  ['metricsAddr', 'REPOHOST_METRICS_ADDR', 'metrics-addr'],
  ['publicUrl', 'REPOHOST_PUBLIC_URL', 'public-url'],
  ['brand', 'REPOHOST_BRAND', 'brand'],
  ['jwtAudiences', 'REPOHOST_JWT_AUDIENCES', 'jwt-audiences'],
  ['jwtMaxTtlS', 'REPOHOST_JWT_MAX_TTL_S', 'jwt-max-ttl-s'],
  ['mailboxLimit', 'REPOHOST_MAILBOX_LIMIT', 'mailbox-limit'],
  ['keyRateLimit', 'REPOHOST_KEY_RATE_LIMIT', 'key-rate-limit'],
  ['jsonContentLimit', 'REPOHOST_JSON_CONTENT_LIMIT', 'json-content-limit'],
  ['orgQuotaBytes', 'REPOHOST_ORG_QUOTA_BYTES', 'org-quota-bytes'],
  ['minFreeBytes', 'REPOHOST_MIN_FREE_BYTES', 'min-free-bytes'],
  ['blobRetentionS', 'REPOHOST_BLOB_RETENTION_S', 'blob-retention-s'],
  ['sagaTimeoutS', 'REPOHOST_SAGA_TIMEOUT_S', 'saga-timeout-s'],
  ['allowPrivateWebhooks', 'REPOHOST_ALLOW_PRIVATE_WEBHOOKS', 'allow-private-webhooks'],
  ['allowPrivateUpstreams', 'REPOHOST_ALLOW_PRIVATE_UPSTREAMS', 'allow-private-upstreams'],
  ['webhookRetryBaseMs', 'REPOHOST_WEBHOOK_RETRY_BASE_MS', 'webhook-retry-base-ms'],
  ['syncRetryBaseMs', 'REPOHOST_SYNC_RETRY_BASE_MS', 'sync-retry-base-ms'],
  ['syncConcurrency', 'REPOHOST_SYNC_CONCURRENCY', 'sync-concurrency'],
  ['maxPushBytes', 'REPOHOST_MAX_PUSH_BYTES', 'max-push-bytes'],
  ['agentTable', 'REPOHOST_AGENT_TABLE', 'agent-table'],
  ['logLevel', 'LOG_LEVEL', 'log-level'],
];

const CLUSTER_SETTINGS: Array<[keyof ClusterConfig, string, string]> = [
  ['name', 'REPOHOST_CLUSTER_NAME', 'cluster-name'],
  ['etcd', 'REPOHOST_CLUSTER_ETCD', 'cluster-etcd'],
  ['nats', 'REPOHOST_CLUSTER_NATS', 'cluster-nats'],
  ['nodeId', 'REPOHOST_NODE_ID', 'node-id'],
  ['nodeUrl', 'REPOHOST_NODE_URL', 'node-url'],
  ['internalUrl', 'REPOHOST_NODE_INTERNAL_URL', 'node-internal-url'],
  ['leaseTtlS', 'REPOHOST_LEASE_TTL_S', 'lease-ttl-s'],
  ['replicas', 'REPOHOST_REPLICAS', 'replicas'],
  ['shardLog', 'REPOHOST_SHARD_LOG', 'shard-log'],
  ['shardLogReplicas', 'REPOHOST_SHARD_LOG_REPLICAS', 'shard-log-replicas'],
  ['rebalanceMaxMoves', 'REPOHOST_REBALANCE_MAX_MOVES', 'rebalance-max-moves'],
  ['rebalanceStableS', 'REPOHOST_REBALANCE_STABLE_S', 'rebalance-stable-s'],
  ['logTrimEntries', 'REPOHOST_LOG_TRIM_ENTRIES', 'log-trim-entries'],
];

export const SETTING_FLAGS = [...SETTINGS, ...CLUSTER_SETTINGS].map(([, , flag]) => flag);

function int(raw: string | undefined, fallback: number, name: string): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`setting ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

const bool = (raw: string | undefined): boolean => raw === '1' || raw === 'true';

/** Builds the configuration from the environment overlaid with `--flag value` pairs. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, flags: Record<string, string> = {}): Config {
  const raw = (key: keyof Config): string | undefined => {
    const entry = SETTINGS.find(([k]) => k === key)!;
    return flags[entry[2]] ?? env[entry[1]];
  };
  const port = int(raw('port'), 8080, 'PORT');
  return {
    port,
    host: raw('host') || '0.0.0.0',
    dataDir: resolve(raw('dataDir') || './data'),
    workers: Math.max(1, int(raw('workers'), cpus().length, 'REPOHOST_WORKERS')),
    metricsAddr: raw('metricsAddr') ?? '127.0.0.1:9464',
    publicUrl: (raw('publicUrl') || `http://localhost:${port}`).replace(/\/+$/, ''),
    brand: raw('brand') || 'Svc',
    jwtAudiences: (raw('jwtAudiences') || 'repohost').split(',').map((s) => s.trim()).filter(Boolean),
    jwtMaxTtlS: int(raw('jwtMaxTtlS'), 14400, 'REPOHOST_JWT_MAX_TTL_S'),
    mailboxLimit: Math.max(1, int(raw('mailboxLimit'), 1000, 'REPOHOST_MAILBOX_LIMIT')),
    keyRateLimit: int(raw('keyRateLimit'), 0, 'REPOHOST_KEY_RATE_LIMIT'),
    jsonContentLimit: int(raw('jsonContentLimit'), 33554432, 'REPOHOST_JSON_CONTENT_LIMIT'),
    orgQuotaBytes: int(raw('orgQuotaBytes'), 0, 'REPOHOST_ORG_QUOTA_BYTES'),
    minFreeBytes: int(raw('minFreeBytes'), 256 * 1024 * 1024, 'REPOHOST_MIN_FREE_BYTES'),
    blobRetentionS: Math.max(1, int(raw('blobRetentionS'), 86400, 'REPOHOST_BLOB_RETENTION_S')),
    sagaTimeoutS: Math.max(1, int(raw('sagaTimeoutS'), 30, 'REPOHOST_SAGA_TIMEOUT_S')),
    allowPrivateWebhooks: bool(raw('allowPrivateWebhooks')),
    allowPrivateUpstreams: bool(raw('allowPrivateUpstreams')),
    webhookRetryBaseMs: int(raw('webhookRetryBaseMs'), 10000, 'REPOHOST_WEBHOOK_RETRY_BASE_MS'),
    syncRetryBaseMs: int(raw('syncRetryBaseMs'), 5000, 'REPOHOST_SYNC_RETRY_BASE_MS'),
    syncConcurrency: Math.max(1, int(raw('syncConcurrency'), 4, 'REPOHOST_SYNC_CONCURRENCY')),
    maxPushBytes: Math.max(1, int(raw('maxPushBytes'), 2 * 1024 ** 3, 'REPOHOST_MAX_PUSH_BYTES')),
    agentTable: raw('agentTable') || '',
    logLevel: raw('logLevel') || 'info',
    secretKey: env.REPOHOST_SECRET_KEY || null,
    cluster: loadClusterConfig((key) => {
      const entry = CLUSTER_SETTINGS.find(([k]) => k === key)!;
      return flags[entry[2]] ?? env[entry[1]];
    }, port),
  };
}

const list = (raw: string | undefined): string[] => (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** Cluster mode is on when etcd endpoints are given; the rest then must describe this node. */
function loadClusterConfig(raw: (key: keyof ClusterConfig) => string | undefined, port: number): ClusterConfig | null {
  const etcd = list(raw('etcd'));
  if (etcd.length === 0) return null;
  const nodeId = raw('nodeId') ?? '';
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(nodeId)) throw new Error(`setting REPOHOST_NODE_ID must be 1-63 lowercase letters, digits or '-', got ${JSON.stringify(nodeId)}`);
  const shardLog = raw('shardLog') || 'jetstream';
  if (shardLog !== 'jetstream' && shardLog !== 'etcd') throw new Error(`setting REPOHOST_SHARD_LOG must be jetstream or etcd, got ${JSON.stringify(shardLog)}`);
  const nats = list(raw('nats'));
  if (shardLog === 'jetstream' && nats.length === 0) throw new Error('setting REPOHOST_CLUSTER_NATS is required with REPOHOST_SHARD_LOG=jetstream');
  const internalUrl = (raw('internalUrl') || '').replace(/\/+$/, '');
  if (!/^http:\/\/[^/]+:\d+$/.test(internalUrl)) throw new Error(`setting REPOHOST_NODE_INTERNAL_URL must be http://host:port, got ${JSON.stringify(internalUrl)}`);
  return {
    name: raw('name') || 'repohost',
    etcd,
    nats,
    nodeId,
    nodeUrl: (raw('nodeUrl') || `http://localhost:${port}`).replace(/\/+$/, ''),
    internalUrl,
    leaseTtlS: Math.max(1, int(raw('leaseTtlS'), 5, 'REPOHOST_LEASE_TTL_S')),
    replicas: Math.max(1, int(raw('replicas'), 3, 'REPOHOST_REPLICAS')),
    shardLog,
    shardLogReplicas: Math.max(1, int(raw('shardLogReplicas'), 3, 'REPOHOST_SHARD_LOG_REPLICAS')),
    rebalanceMaxMoves: Math.max(1, int(raw('rebalanceMaxMoves'), 8, 'REPOHOST_REBALANCE_MAX_MOVES')),
    rebalanceStableS: int(raw('rebalanceStableS'), 10, 'REPOHOST_REBALANCE_STABLE_S'),
    logTrimEntries: int(raw('logTrimEntries'), 1000, 'REPOHOST_LOG_TRIM_ENTRIES'),
  };
}
