import { readFileSync } from 'node:fs';
import { createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Config } from '../config.js';
import { invalid } from '../errors.js';
import { log } from '../log.js';
import { openStorage, type Storage } from '../storage/database.js';
import { createOrg, createSigningKey, setKeyScopes, setKeyStatus, setKeyTags } from '../storage/admin-store.js';
import { LmdbOrgDirectory } from '../storage/lmdb-org-directory.js';
import { directoryLocation, openOrgDirectory } from '../cluster/org-directory/open-org-directory.js';
import { SecretBox } from '../storage/secret-box.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import { getRepoByName } from '../storage/repo-store.js';
import { exportRepository } from '../storage/export.js';
import { backupDataDir } from '../storage/backup.js';
import { exportShard, importShard, parseShardName } from '../storage/shard-stream.js';
import type { SigningKeyRecord } from '../storage/records.js';

export interface CliContext {
  config: Config;
  args: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  json: boolean;
}

/** Returns the exit code, or -1 for a command that keeps running (serve). */
type Handler = (ctx: CliContext) => Promise<number> | number;

function out(ctx: CliContext, value: unknown, human: string): void {
  process.stdout.write(ctx.json ? JSON.stringify(value) + '\n' : human + '\n');
}

/** What a command prints: the value with `--json`, the text otherwise. */
interface Outcome {
  value: unknown;
  human: string;
}

/**
 * Runs an operator command on the org directory — the data directory's, or the cluster's in etcd
 * when REPOHOST_CLUSTER_ETCD is set — and the data directory's storage (for what names a
 * repository), prints its outcome once `directory.flush()` has committed its writes (never a
 * success that is not stored), and closes both once the writes are on disk.
 */
async function withDirectory(ctx: CliContext, fn: (directory: OrgDirectory, storage: Storage) => Outcome | Promise<Outcome>): Promise<number> {
  const storage = openStorage(ctx.config.dataDir);
  try {
    const opened = await openOrgDirectory(storage, directoryLocation(ctx.config));
    try {
      const { value, human } = await fn(opened.directory, storage);
      await opened.directory.flush();
      out(ctx, value, human);
      return 0;
    } finally {
      await opened.close();
    }
  } finally {
    await storage.root.flushed;
    await storage.close();
  }
}

const list = (v: unknown): string[] => (typeof v === 'string' && v ? v.split(',').map((s) => s.trim()).filter(Boolean) : []);

function keyView(directory: OrgDirectory, rec: SigningKeyRecord) {
  const org = directory.org(rec.org_id);
  return { id: rec.id, org: org?.slug, name: rec.name, scopes: rec.scopes, repo_ids: rec.repo_ids, tags: rec.tags, status: rec.status, created_at: rec.created_at, revoked_at: rec.revoked_at };
}

function keyStatus(status: 'active' | 'disabled' | 'revoked'): Handler {
  return (ctx) =>
    withDirectory(ctx, (directory) => {
      const id = ctx.args[0];
      if (!id) throw invalid('usage: repohost key disable|enable|revoke <key id>');
      const rec = setKeyStatus(directory, id, status);
      return { value: keyView(directory, rec), human: `${rec.id} ${rec.status}` };
    });
}

/** Reads a private key file: PKCS#8 PEM, a private JWK, or the JSON printed by `key create --json`. */
function readPrivateKey(file: string): { key: KeyObject; kid: string | null } {
  const text = readFileSync(file, 'utf8').trim();
  if (text.startsWith('{')) {
    const json = JSON.parse(text) as { id?: string; private_key_jwk?: Record<string, string>; d?: string };
    const jwk = json.private_key_jwk ?? (json as Record<string, string>);
    return { key: createPrivateKey({ key: jwk, format: 'jwk' }), kid: json.private_key_jwk && json.id ? json.id : null };
  }
  return { key: createPrivateKey(text), kid: null };
}

function parseAuthor(raw: string): [string, string | null] {
  const m = /^(.*?)\s*<([^>]*)>\s*$/.exec(raw);
  return m ? [m[1]!, m[2] || null] : [raw.trim(), null];
}

export const commandHandlers: Record<string, Handler> = {
  async serve(ctx) {
    const { startServer } = await import('../server.js');
    // A stray rejection is a bug to find (hence a trace id in the log), not a reason to stop serving.
    process.on('unhandledRejection', (err) => log.error('unhandled rejection', { err, trace_id: randomUUID().replace(/-/g, '') }));
    // A write past the file-size limit (RLIMIT_FSIZE) must fail like a full disk (EFBIG: the
    // request gets 503 and nothing is saved), not end the process, which is the signal's default.
    process.on('SIGXFSZ', () => undefined);
    let server: Awaited<ReturnType<typeof startServer>>;
    try {
      server = await startServer(ctx.config);
    } catch (err) {
      // Listeners and worker threads may already be up: exit instead of lingering half-started.
      log.error('start-up failed', { err });
      process.exit(1);
    }
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info('shutting down', { signal });
      server.stop().then(
        // 0, or the status a cluster node leaving on a lost lease set meanwhile.
        () => process.exit(),
        (err) => {
          log.error('shutdown failed', { err });
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    return -1;
  },

  'org create': (ctx) =>
    withDirectory(ctx, (directory) => {
      const slug = ctx.args[0];
      if (!slug) throw invalid('usage: repohost org create <slug> [--name NAME]');
      const org = createOrg(directory, slug, ctx.values.name as string | undefined);
      return { value: { id: org.id, slug: org.slug, name: org.name }, human: `created org ${org.slug} (${org.id})` };
    }),

  'key create': (ctx) =>
    withDirectory(ctx, (directory, storage) => {
      const org = ctx.values.org as string | undefined;
      if (!org) throw invalid('key create needs --org <slug>');
      const created = createSigningKey(directory, storage, org, { scopes: list(ctx.values.scopes), repos: list(ctx.values.repos), name: ctx.values.name as string | undefined });
      const { record } = created;
      return {
        value: {
          id: record.id,
          org,
          name: record.name,
          scopes: record.scopes,
          repo_ids: record.repo_ids,
          private_key_pem: created.privateKeyPem,
          private_key_jwk: created.privateKeyJwk,
          public_key_jwk: record.public_jwk,
        },
        human:
          `key ${record.id} (${record.name}) scopes=${record.scopes.join(',')}\n` +
          `The server keeps only the public key. Store this private key now:\n${created.privateKeyPem.trim()}`,
      };
    }),

  'key list': (ctx) =>
    withDirectory(ctx, (directory) => {
      const slug = ctx.values.org as string | undefined;
      const org = slug ? directory.orgBySlug(slug) : undefined;
      if (!org) throw invalid('key list needs --org <existing slug>');
      const keys = directory.orgKeys(org.id).map((k) => keyView(directory, k));
      return { value: { keys }, human: keys.map((k) => `${k.id}\t${k.status}\t${k.scopes.join(',')}\t${k.name}`).join('\n') };
    }),

  'key disable': keyStatus('disabled'),
  'key enable': keyStatus('active'),
  'key revoke': keyStatus('revoked'),

  'key scopes': (ctx) =>
    withDirectory(ctx, (directory) => {
      const [id, scopes] = ctx.args;
      if (!id || !scopes) throw invalid('usage: repohost key scopes <key id> <scope,scope>');
      const rec = setKeyScopes(directory, id, list(scopes));
      return { value: keyView(directory, rec), human: `${rec.id} scopes=${rec.scopes.join(',')}` };
    }),

  'key tags': (ctx) =>
    withDirectory(ctx, (directory) => {
      const [id, ...pairs] = ctx.args;
      if (!id) throw invalid('usage: repohost key tags <key id> k=v k2=');
      // Without a prototype, `__proto__=x` is an ordinary key that the tag rules can refuse.
      const tags = Object.create(null) as Record<string, string>;
      for (const p of pairs) {
        const eq = p.indexOf('=');
        if (eq <= 0) throw invalid(`tag "${p}" must be key=value (empty value removes)`);
        tags[p.slice(0, eq)] = p.slice(eq + 1);
      }
      const rec = setKeyTags(directory, id, tags);
      return { value: { id: rec.id, tags: rec.tags }, human: Object.entries(rec.tags).map(([k, v]) => `${k}=${v}`).join('\n') };
    }),

  /**
   * Copies the data directory's orgs, keys and webhook targets into the cluster's directory in
   * etcd: once, when a cluster starts from an existing single node (run again, it adds only what
   * is missing). Their sealed secrets are copied as they are, so the cluster's key must be this
   * data directory's.
   */
  async 'cluster import-orgs'(ctx) {
    const location = directoryLocation(ctx.config);
    if (!location) throw invalid('cluster import-orgs needs REPOHOST_CLUSTER_ETCD (the cluster to import into)');
    if (!ctx.config.secretKey) throw invalid(`cluster import-orgs needs REPOHOST_SECRET_KEY: the cluster's key, the content of ${ctx.config.dataDir}/secret.key`);
    SecretBox.install(ctx.config.dataDir, ctx.config.secretKey);
    const { importOrgs } = await import('../cluster/org-directory/import-orgs.js');
    // The directory withDirectory opens is the cluster's (REPOHOST_CLUSTER_ETCD is set); the data
    // directory's is read through its storage.
    return withDirectory(ctx, async (cluster, storage) => {
      const counts = await importOrgs(new LmdbOrgDirectory(storage), cluster);
      return { value: counts, human: `imported ${counts.orgs} orgs, ${counts.keys} keys, ${counts.targets} webhook targets into cluster ${location.cluster} (${counts.present} were there already)` };
    });
  },

  async export(ctx) {
    const [target, dir] = ctx.args;
    const slash = target?.indexOf('/') ?? -1;
    if (!target || !dir || slash <= 0) throw invalid('usage: repohost export <org>/<repo> <dir> [--data DIR]');
    const storage = openStorage(ctx.config.dataDir);
    try {
      const org = new LmdbOrgDirectory(storage).orgBySlug(target.slice(0, slash));
      const repo = org && getRepoByName(storage.meta, org.id, target.slice(slash + 1));
      if (!repo) throw invalid(`repository ${target} not found`);
      const summary = await exportRepository(storage, repo, dir);
      out(ctx, summary, `exported ${target} to ${summary.dir}: ${summary.objects} objects, ${summary.bookmarks} bookmarks, ${summary.tags} tags, ${summary.notes} notes refs, ${summary.kept_commits} kept commits`);
      return 0;
    } finally {
      await storage.close();
    }
  },

  async 'shard export'(ctx) {
    const [name, file] = ctx.args;
    if (!name || !file) throw invalid('usage: repohost shard export <n|global> <file> [--data DIR]');
    const shard = parseShardName(name);
    const storage = openStorage(ctx.config.dataDir);
    try {
      const { records, bytes } = exportShard(storage, shard, file);
      out(ctx, { shard, file, records, bytes }, `exported shard ${shard} to ${file}: ${records} records, ${bytes} bytes`);
      return 0;
    } finally {
      await storage.close();
    }
  },

  async 'shard import'(ctx) {
    const [file] = ctx.args;
    if (!file) throw invalid('usage: repohost shard import <file> [--replace] [--data DIR]');
    const storage = openStorage(ctx.config.dataDir);
    try {
      const { shard, records } = importShard(storage, file, { replace: ctx.values.replace === true });
      out(ctx, { shard, file, records }, `imported shard ${shard} from ${file}: ${records} records`);
      return 0;
    } finally {
      await storage.close();
    }
  },

  async backup(ctx) {
    const [dir] = ctx.args;
    if (!dir) throw invalid('usage: repohost backup <dir> [--data DIR]');
    const storage = openStorage(ctx.config.dataDir);
    try {
      const { bytes, secretKey } = await backupDataDir(storage, ctx.config.dataDir, dir);
      out(ctx, { dir, bytes, secret_key: secretKey }, `backed up ${ctx.config.dataDir} to ${dir}: ${bytes} bytes${secretKey ? ' and secret.key' : ' (no secret.key yet)'}`);
      return 0;
    } finally {
      await storage.close();
    }
  },

  /** The control plane as etcd holds it; needs the node's cluster settings (REPOHOST_CLUSTER_ETCD …). */
  async 'cluster status'(ctx) {
    const cluster = ctx.config.cluster;
    if (!cluster) throw invalid('cluster status needs cluster mode: set REPOHOST_CLUSTER_ETCD and the node settings');
    const [{ createEtcdClient }, { controlKeys }, status, { logPositionColumn }] = await Promise.all([
      import('../cluster/control/etcd-client.js'),
      import('../cluster/control/keys.js'),
      import('../cluster/control/cluster-status.js'),
      import('../cluster/replica/log-position-column.js'),
    ]);
    const client = createEtcdClient({ endpoints: cluster.etcd });
    try {
      // The followers' lag and the owner's log position, from the nodes' progress reports.
      const columns = [status.followerLagColumn, logPositionColumn];
      const s = await status.readClusterStatus(client, controlKeys(cluster.name), cluster.name, columns);
      out(ctx, s, status.formatClusterStatus(s, columns.map((c) => c.name)));
      return 0;
    } finally {
      client.close();
    }
  },

  async token(ctx) {
    const file = ctx.values.key as string | undefined;
    const org = ctx.values.org as string | undefined;
    if (!file || !org) throw invalid('token needs --key <private key file> and --org <slug>');
    const { key, kid } = readPrivateKey(file);
    const ttl = Number(ctx.values.ttl ?? 3600);
    if (!Number.isInteger(ttl) || ttl <= 0) throw invalid('--ttl must be a positive number of seconds');
    const scopes = list(ctx.values.scopes);
    const claims: Record<string, unknown> = { scopes: scopes.length ? scopes : ['admin'] };
    const repos = list(ctx.values.repos);
    if (repos.length) claims.repos = repos.map((r) => (r.includes('/') ? r : `${org}/${r}`));
    const authors = (ctx.values.author as string[] | undefined) ?? [];
    if (authors.length) claims.author = authors.map(parseAuthor);
    const header = (ctx.values.kid as string | undefined) ?? kid
      ? { alg: 'EdDSA', kid: ((ctx.values.kid as string | undefined) ?? kid)! }
      : { alg: 'EdDSA', jwk: { kty: 'OKP', crv: 'Ed25519', x: (createPublicKey(key).export({ format: 'jwk' }) as { x: string }).x } };
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT(claims)
      .setProtectedHeader(header)
      .setIssuer(org)
      .setAudience((ctx.values.audience as string | undefined) ?? ctx.config.jwtAudiences[0]!)
      .setIssuedAt(now)
      .setExpirationTime(now + ttl)
      .sign(key);
    out(ctx, { token, expires_at: new Date((now + ttl) * 1000).toISOString() }, token);
    return 0;
  },
};
