import { parseArgs } from 'node:util';
import { loadConfig, SETTING_FLAGS } from '../config.js';
import { isServiceError } from '../errors.js';
import { commandHandlers } from './commands.js';

/**
 * `repohost` command line (API §13). Every command takes `--data DIR` (default ./data or
 * REPOHOST_DATA) and `--json`; `serve` also takes a flag for every setting.
 */
const USAGE = `usage: repohost <command> [options]

  serve [--port N] [--workers N] [--data DIR] [--<setting> value]…
  org create <slug> [--name NAME]
  key create --org <slug> --scopes read,write [--repos a,b] [--name NAME]
  key list --org <slug>
  key disable|enable|revoke <key id>
  key scopes <key id> <scope,scope>
  key tags <key id> k=v k2=
  token --key <private key file> --org <slug> [--scopes s,…] [--repos a,…] [--ttl 3600] [--author "Name <email>"]…
  export <org>/<repo> <dir>
  backup <dir>
  shard export <n|global> <file>
  shard import <file> [--replace]
  cluster status            (cluster mode: the node's REPOHOST_CLUSTER_* settings)
  cluster import-orgs       (once: the data directory's orgs, keys and targets into the cluster's etcd)

common options: --data DIR, --json`;

const stringOptions = ['data', 'name', 'org', 'scopes', 'repos', 'key', 'ttl', 'kid', 'audience', ...SETTING_FLAGS];

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: 'boolean' },
      replace: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      author: { type: 'string', multiple: true },
      ...Object.fromEntries(stringOptions.map((o) => [o, { type: 'string' as const }])),
    },
  });
  if (values.help || positionals.length === 0) {
    process.stdout.write(USAGE + '\n');
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  const flags: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) if (typeof v === 'string') flags[k] = v;
  const config = loadConfig(process.env, flags);
  const [group, ...rest] = positionals;
  const name = group === 'org' || group === 'key' || group === 'shard' || group === 'cluster' ? `${group} ${rest.shift() ?? ''}` : group!;
  const handler = commandHandlers[name.trim()];
  if (!handler) {
    process.stderr.write(`unknown command "${name.trim()}"\n${USAGE}\n`);
    return 2;
  }
  return handler({ config, args: rest, values, json: values.json === true });
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== -1) process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`repohost: ${isServiceError(err) || err instanceof TypeError ? err.message : (err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
