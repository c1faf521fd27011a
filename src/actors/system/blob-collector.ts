/**
 * The collector of unreferenced blobs (API §5.4). A timer on the main thread looks for
 * repositories with objects pending since before the retention (`REPOHOST_BLOB_RETENTION_S`) or
 * with uploads whose chunks never committed (idle for the retention: a body this process is still
 * receiving is not an orphan), and sends each a `blob.collect` command: the
 * deleting happens in the repository's own actor, serialized with its writes. The sweep runs a
 * few times per retention (at least every 250 ms, at most every 15 minutes), so a blob goes at
 * most that much after its retention ends. Each node looks at the shards it serves: the others'
 * owners collect theirs.
 */
import type { Services } from '../../http/services.js';
import { log } from '../../log.js';
import type { PrincipalMsg } from '../../protocol/messages.js';
import { findCollectable, type CollectResult } from '../../storage/blob-collect.js';
import { forgetStaging, isUploadStaged, lastStagingActivity, stagingUploads } from '../../storage/blob-store.js';
import type { CollectBlobsInput } from '../commands/blob-collect.js';
import type { SystemActor } from './index.js';
import { isTransientActorError, startPeriodicSweep } from './periodic-sweep.js';
import { repoActor } from '../actor-names.js';

export function sweepIntervalMs(retentionS: number): number {
  return Math.min(15 * 60_000, Math.max(250, (retentionS * 1000) / 4));
}

const COLLECTOR: PrincipalMsg = { orgId: '', orgSlug: '', keyId: '', keyName: 'blob-collector', permissions: [], authors: [], restricted: false, allowedRepoIds: [] };

export function startBlobCollector(services: Services): SystemActor {
  const { storage, runtime, config } = services;

  async function collect(repoId: string, uploadIds: string[], stopped: () => boolean): Promise<void> {
    const input: CollectBlobsInput = { repo_id: repoId, upload_ids: uploadIds };
    for (;;) {
      const reply = await runtime.call({ actor: repoActor(repoId), command: 'blob.collect', input, principal: COLLECTOR, traceId: `collect-${repoId}` });
      const result = JSON.parse(Buffer.from(reply.body).toString('utf8')) as CollectResult;
      if (result.objects > 0 || result.uploads > 0) log.info('collected unreferenced blobs', { repo_id: repoId, ...result });
      if (!result.more || stopped()) return;
      input.upload_ids = [];
    }
  }

  async function sweep(stopped: () => boolean): Promise<void> {
    // Uploads of this process that committed (or were collected) need no watching any more.
    for (const { uploadId, repoId } of stagingUploads()) if (!isUploadStaged(storage, repoId, uploadId)) forgetStaging(uploadId);
    const cutoff = Date.now() - config.blobRetentionS * 1000;
    for (const [repoId, uploadIds] of findCollectable(storage.meta, services.served.ownedShards(), cutoff, lastStagingActivity)) {
      if (stopped()) return;
      try {
        await collect(repoId, uploadIds, stopped);
      } catch (err) {
        if (!isTransientActorError(err)) log.error('collecting blobs failed', { repo_id: repoId, err });
      }
    }
  }

  return startPeriodicSweep(sweepIntervalMs(config.blobRetentionS), sweep);
}
