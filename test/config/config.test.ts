import t from 'tap';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { loadConfig } from '../../src/config.js';

/** Every operator setting of API §13 with its default, from the environment or a `serve` flag. */
t.test('config - defaults of every setting', async (t) => {
  const c = loadConfig({}, {});
  t.same(c, {
    port: 8080,
    host: '0.0.0.0',
    dataDir: resolve('./data'),
    workers: cpus().length,
    metricsAddr: '127.0.0.1:9464',
    publicUrl: 'http://localhost:8080',
    brand: 'Svc',
    jwtAudiences: ['repohost'],
    jwtMaxTtlS: 14400,
    mailboxLimit: 1000,
    keyRateLimit: 0,
    jsonContentLimit: 33554432,
    orgQuotaBytes: 0,
    minFreeBytes: 268435456,
    blobRetentionS: 86400,
    sagaTimeoutS: 30,
    allowPrivateWebhooks: false,
    allowPrivateUpstreams: false,
    webhookRetryBaseMs: 10000,
    syncRetryBaseMs: 5000,
    syncConcurrency: 4,
    maxPushBytes: 2147483648,
    agentTable: '',
    logLevel: 'info',
    secretKey: null,
    cluster: null,
  });
});

t.test('config - environment, flags over environment, and refusals', async (t) => {
  const env = {
    PORT: '9000',
    REPOHOST_DATA: '/tmp/rh-data',
    REPOHOST_WORKERS: '3',
    REPOHOST_METRICS_ADDR: '',
    REPOHOST_PUBLIC_URL: 'https://repos.example.com/',
    REPOHOST_BRAND: 'Mesa',
    REPOHOST_JWT_AUDIENCES: 'repohost, mesa-api',
    REPOHOST_JWT_MAX_TTL_S: '600',
    REPOHOST_MAILBOX_LIMIT: '2',
    REPOHOST_KEY_RATE_LIMIT: '50',
    REPOHOST_JSON_CONTENT_LIMIT: '1024',
    REPOHOST_ORG_QUOTA_BYTES: '1000000',
    REPOHOST_BLOB_RETENTION_S: '2',
    REPOHOST_ALLOW_PRIVATE_WEBHOOKS: '1',
    REPOHOST_ALLOW_PRIVATE_UPSTREAMS: 'true',
    REPOHOST_WEBHOOK_RETRY_BASE_MS: '10',
    REPOHOST_SYNC_RETRY_BASE_MS: '20',
    REPOHOST_SYNC_CONCURRENCY: '8',
    REPOHOST_MAX_PUSH_BYTES: '65536',
    REPOHOST_AGENT_TABLE: '/etc/agents.json',
    LOG_LEVEL: 'debug',
  };
  const c = loadConfig(env, {});
  t.equal(c.port, 9000);
  t.equal(c.dataDir, '/tmp/rh-data');
  t.equal(c.workers, 3);
  t.equal(c.metricsAddr, '', 'empty disables the operator listener');
  t.equal(c.publicUrl, 'https://repos.example.com', 'trailing slash dropped');
  t.equal(c.brand, 'Mesa');
  t.same(c.jwtAudiences, ['repohost', 'mesa-api']);
  t.same([c.jwtMaxTtlS, c.mailboxLimit, c.keyRateLimit, c.jsonContentLimit, c.orgQuotaBytes], [600, 2, 50, 1024, 1000000]);
  t.equal(c.blobRetentionS, 2);
  t.same([c.allowPrivateWebhooks, c.allowPrivateUpstreams], [true, true]);
  t.same([c.webhookRetryBaseMs, c.syncRetryBaseMs, c.syncConcurrency], [10, 20, 8]);
  t.equal(c.maxPushBytes, 65536);
  t.equal(c.agentTable, '/etc/agents.json');
  t.equal(c.logLevel, 'debug');
  const flagged = loadConfig(env, { workers: '1', port: '0', 'mailbox-limit': '7', brand: 'Acme', 'metrics-addr': '127.0.0.1:0' });
  t.same([flagged.workers, flagged.port, flagged.mailboxLimit, flagged.brand, flagged.metricsAddr], [1, 0, 7, 'Acme', '127.0.0.1:0'], 'flags win');
  t.equal(loadConfig({ PORT: '9001' }, {}).publicUrl, 'http://localhost:9001', 'the public URL follows the port');
  for (const [name, value] of [['REPOHOST_WORKERS', 'two'], ['PORT', '-1'], ['REPOHOST_MAILBOX_LIMIT', '1.5']]) {
    t.throws(() => loadConfig({ [name!]: value }, {}), new RegExp(name!), `${name}=${value} refused`);
  }
});

t.test('config - the shard log backend and its stream replicas', async (t) => {
  const node = { REPOHOST_CLUSTER_ETCD: 'http://10.0.0.1:2379', REPOHOST_NODE_ID: 'n1', REPOHOST_NODE_INTERNAL_URL: 'http://10.0.0.5:9100' };
  const nats = { ...node, REPOHOST_CLUSTER_NATS: 'nats://10.0.0.1:4222' };
  t.match(loadConfig(nats).cluster, { shardLog: 'jetstream', shardLogReplicas: 3 });
  t.match(loadConfig({ ...nats }, { 'shard-log': 'etcd', 'shard-log-replicas': '1' }).cluster, { shardLog: 'etcd', shardLogReplicas: 1 });
  t.throws(() => loadConfig(node), /REPOHOST_CLUSTER_NATS is required/, 'JetStream needs NATS servers');
  t.throws(() => loadConfig({ ...nats, REPOHOST_SHARD_LOG: 'kafka' }), /jetstream or etcd/);
});
