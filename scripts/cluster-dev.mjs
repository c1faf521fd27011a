// A local 3-node cluster for development (`npm run cluster:dev`): 3 etcd members, 3 nats-servers
// (JetStream) and 3 repohost nodes on loopback, each node with its own data directory under
// ./cluster-dev/. Prints the nodes' URLs and the settings the CLI needs to write through the
// cluster (`repohost org create`, `repohost key create` with them set). Ctrl-C stops everything.
//
// Needs etcd and nats-server on the PATH (Debian: etcd-server, nats-server). REPOHOST_SHARD_LOG
// picks the log (jetstream by default, or etcd).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// The engines are started as the cluster tests start theirs (built by `npm run build`).
const { freePorts, startEtcd, startNats } = await import(join(root, 'dist/test/helpers/cluster-engines.js'));
const { CLI_NODE_SETTINGS, clusterSettings, nodeSettings } = await import(join(root, 'dist/test/helpers/cluster-settings.js'));
const cli = join(root, 'dist/src/cli/main.js');
const base = join(root, 'cluster-dev');
mkdirSync(base, { recursive: true });
const keyFile = join(base, 'secret.key');
if (!existsSync(keyFile)) writeFileSync(keyFile, randomBytes(32).toString('base64') + '\n', { mode: 0o600 });

const log = process.env.REPOHOST_SHARD_LOG || 'jetstream';
const etcd = await startEtcd();
const nats = log === 'jetstream' ? await startNats() : null;
const ports = await freePorts(9);
const settings = clusterSettings({ name: 'dev', etcd, nats, log, secretKey: readFileSync(keyFile, 'utf8').trim() });
const nodes = [0, 1, 2].map((i) => ({
  id: `node${i + 1}`,
  dataDir: join(base, `node${i + 1}`),
  port: ports[3 * i],
  internal: ports[3 * i + 1],
  metrics: ports[3 * i + 2],
}));
const children = nodes.map((n) =>
  spawn(process.execPath, [cli, 'serve', '--data', n.dataDir, '--port', String(n.port), '--host', '127.0.0.1', '--metrics-addr', `127.0.0.1:${n.metrics}`], {
    env: { ...process.env, ...settings, ...nodeSettings(n.id, n.port, n.internal) },
    stdio: ['ignore', 'inherit', 'inherit'],
  }),
);

const env = Object.entries({ ...settings, ...CLI_NODE_SETTINGS })
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');
console.log(`\nrepohost cluster (${log} shard log):`);
for (const n of nodes) console.log(`  ${n.id}: http://127.0.0.1:${n.port}  status: http://127.0.0.1:${n.metrics}/cluster/status`);
console.log(`\nWrite orgs and keys through the cluster with:\n  ${env} node ${cli} org create acme --data ${nodes[0].dataDir}\n`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve() : (c.once('exit', resolve), c.kill('SIGTERM'))))));
  await nats?.stop();
  await etcd.stop();
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
for (const c of children) c.on('exit', (code) => !stopping && console.error(`a node exited (${code})`));
