import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ActorRuntime, type RuntimeOptions } from '../../src/actors/runtime.js';
import type { PrincipalMsg } from '../../src/protocol/messages.js';

/** An actor runtime on a temporary data directory, without HTTP, for runtime-level tests. */
export const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}.js`, import.meta.url));

export function principal(orgId = 'org_test'): PrincipalMsg {
  return { orgId, orgSlug: 'acme', keyId: 'key_test', keyName: 'tester', permissions: ['admin'], authors: [], restricted: false, allowedRepoIds: [] };
}

export function startRuntime(opts: Partial<RuntimeOptions> & { commandsModule: string; dataDir?: string }): { runtime: ActorRuntime; dataDir: string; cleanup: () => Promise<void> } {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'repohost-runtime-'));
  const runtime = new ActorRuntime({
    workers: 2,
    mailboxLimit: 1000,
    settings: { dataDir, publicUrl: 'http://localhost:0', brand: 'Svc', allowPrivateWebhooks: false, allowPrivateUpstreams: true, orgQuotaBytes: 0, blobRetentionS: 86400, logLevel: 'silent', orgDirectory: null },
    ...opts,
  });
  return {
    runtime,
    dataDir,
    async cleanup() {
      await runtime.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
