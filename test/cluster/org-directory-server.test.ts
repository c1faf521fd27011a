import t from 'tap';
import { createPrivateKey, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createOrg } from '../../src/storage/admin-store.js';
import { openStorage } from '../../src/storage/database.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { SecretBox } from '../../src/storage/secret-box.js';
import { startCluster } from '../helpers/cluster.js';
import { CLI_NODE_SETTINGS } from '../helpers/cluster-settings.js';
import { target } from '../helpers/org-directory-behaviour.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { createTestKey, runCli, signToken, type TestKey } from '../helpers/server.js';

/**
 * The org directory in etcd through the real CLI and real servers: two repohost processes in
 * cluster mode (each on its own data directory) share one etcd. Orgs and keys made with the CLI
 * authenticate on both, a webhook target created through one node's API is listed by the other,
 * and a key revoked with the CLI is refused by both within the watch latency.
 */
// No node yet: they start once the CLI has written what they load, both at once, so the shards
// are placed soon after both have joined.
const cluster = await startCluster(t, { log: 'etcd', count: 0, rebalanceStableS: 1, workers: 1 });
const dirs: string[] = [];
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'repohost-cluster-dir-'));
  dirs.push(d);
  return d;
};
t.teardown(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const clusterEnv = (key = cluster.env.REPOHOST_SECRET_KEY!): Record<string, string> => ({ ...cluster.env, ...CLI_NODE_SETTINGS, REPOHOST_SECRET_KEY: key });
const cli = async (args: string[], dataDir: string, env = clusterEnv()): Promise<{ code: number; json: any; stderr: string }> => {
  const r = await runCli([...args, '--data', dataDir, '--json'], env);
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { code: r.code, json, stderr: r.stderr };
};

/** Polls until `check` holds; the milliseconds it took, or Infinity after `limitMs`. */
async function within(check: () => Promise<boolean>, limitMs = 5000): Promise<number> {
  const start = performance.now();
  while (!(await check())) {
    if (performance.now() - start > limitMs) return Infinity;
    await sleep(2);
  }
  return performance.now() - start;
}

t.test('cluster import-orgs copies a single node\'s orgs, keys and targets once', async (t) => {
  const single = tempDir();
  const storage = openStorage(single);
  const local = new LmdbOrgDirectory(storage);
  const org = createOrg(local, 'legacy');
  const key = createTestKey(single, { org: 'legacy', scopes: ['read'] });
  const hook = { ...target(org.id, 'legacy-hook'), sealed_secret: SecretBox.forDataDir(single).seal('whsec_legacy') };
  local.putTarget(hook);
  await storage.close();
  const nodeKey = readFileSync(join(single, 'secret.key'), 'utf8').trim();

  const wrongKey = await cli(['cluster', 'import-orgs'], single);
  t.not(wrongKey.code, 0, 'refused with a cluster key that is not the data directory\'s');
  t.match(wrongKey.stderr, /another key/);
  const first = await cli(['cluster', 'import-orgs'], single, clusterEnv(nodeKey));
  t.equal(first.code, 0, first.stderr);
  t.same(first.json, { orgs: 1, keys: 1, targets: 1, present: 0 });
  const again = await cli(['cluster', 'import-orgs'], single, clusterEnv(nodeKey));
  t.same(again.json, { orgs: 0, keys: 0, targets: 0, present: 3 }, 'run again, it adds nothing');
  const listed = await cli(['key', 'list', '--org', 'legacy'], tempDir());
  t.same(listed.json.keys.map((k: { id: string }) => k.id), [key.id], 'the CLI of another node lists the imported key from etcd');
});

t.test('CLI and two servers on one etcd directory', async (t) => {
  // The harness's own org is `acme`: this one is made here.
  const cliDir = tempDir();
  t.equal((await cli(['org', 'create', 'beta'], cliDir)).code, 0);
  const taken = await cli(['org', 'create', 'beta'], tempDir());
  t.not(taken.code, 0, 'a slug taken through etcd is refused from another data directory');
  const created = await cli(['key', 'create', '--org', 'beta', '--scopes', 'admin'], cliDir);
  t.equal(created.code, 0, created.stderr);
  const key: TestKey = { id: created.json.id, privateKey: createPrivateKey(created.json.private_key_pem), publicX: created.json.public_key_jwk.x };

  const [a, b] = await Promise.all([cluster.addNode(), cluster.addNode()]);
  // Cluster mode serves a shard once the control plane has placed it and its owner activated it.
  await cluster.settled();
  const token = await signToken(key, 'beta');
  for (const s of [a, b]) t.equal((await s.api('GET', '/beta/webhook-targets', { token })).status, 200, 'a key made with the CLI authenticates on every node');

  const made = await a.api('POST', '/beta/webhook-targets', { token, body: { url: 'https://93.184.215.14/hook', events: ['push'], name: 'shared' } });
  t.equal(made.status, 201, made.text);
  t.match(made.json.secret, /^whsec_/);
  const listedOnB = await within(async () => (await b.api('GET', '/beta/webhook-targets', { token })).json.webhook_targets?.some((x: { id: string }) => x.id === made.json.id) === true, 1000);
  t.ok(listedOnB < Infinity, `a target created through node a is listed by node b (${listedOnB.toFixed(0)} ms)`);

  // Node b's worker threads hold their own directories: its org actor must see the target to store
  // the event, its webhook actor to send it, signed with the secret node a sealed.
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const hooked = await a.api('POST', '/beta/webhook-targets', { token, body: { url: receiver.url('/c'), events: ['repo.created'], name: 'delivered' } });
  t.equal(hooked.status, 201, hooked.text);
  receiver.setSecret('/c', hooked.json.secret);
  await within(async () => (await b.api('GET', `/beta/webhook-targets/${hooked.json.id}`, { token })).status === 200, 1000);
  const repo = await b.api('POST', '/beta/repos', { token, body: { name: 'made-on-b' } });
  t.equal(repo.status, 201, repo.text);
  await receiver.waitFor(() => receiver.unique('/c').length > 0, 15_000, 'the repo.created delivery from node b');
  const delivery = receiver.unique('/c')[0]!;
  t.equal(delivery.body.type, 'repo.created');
  t.ok(delivery.verified, 'node b signed it with the secret created on node a (one REPOHOST_SECRET_KEY)');

  const revoked = await cli(['key', 'revoke', key.id], cliDir);
  t.equal(revoked.code, 0, revoked.stderr);
  t.equal(revoked.json.status, 'revoked');
  for (const [name, s] of [['a', a], ['b', b]] as const) {
    const refusedAfter = await within(async () => (await s.api('GET', '/beta/webhook-targets', { token })).status === 401, 1000);
    t.ok(refusedAfter < Infinity, `node ${name} refuses the revoked key ${refusedAfter.toFixed(0)} ms after the CLI returned`);
  }
});

t.test('a node whose REPOHOST_SECRET_KEY differs from the cluster\'s does not start', async (t) => {
  const other = randomBytes(32).toString('base64');
  const refused = await cluster.addNode({ env: { REPOHOST_SECRET_KEY: other } }).then(
    () => null,
    (err: Error) => err,
  );
  t.match(refused?.message, /REPOHOST_SECRET_KEY differs/);
});
