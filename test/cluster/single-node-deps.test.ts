import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { runCli } from '../helpers/server.js';

/**
 * A single node never loads the cluster's clients: the server starts, answers, and its CLI writes
 * the org directory without the etcd client in its module cache (this file imports nothing of
 * cluster mode, so only the server could have loaded it).
 */
const loadedEtcd = (): string[] => Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('/node_modules/etcd3/'));

t.test('a single node serves and its CLI writes without loading etcd3', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'repohost-single-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  t.equal((await runCli(['org', 'create', 'solo', '--data', dataDir])).code, 0, 'the CLI writes the local directory');
  const server = await startServer(loadConfig({ REPOHOST_DATA: dataDir, PORT: '0', HOST: '127.0.0.1', REPOHOST_METRICS_ADDR: '', REPOHOST_WORKERS: '1', LOG_LEVEL: 'silent' }));
  t.teardown(() => server.stop());
  t.equal((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status, 200);
  t.equal(server.services.directory.orgBySlug('solo')?.slug, 'solo', 'the local directory serves the org');
  t.same(loadedEtcd(), [], 'no module of etcd3 was loaded');
});
