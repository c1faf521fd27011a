import { collectRepository } from '../../storage/blob-collect.js';
import { dropAllPending } from '../../storage/pending-objects.js';
import { defineCommand } from '../command.js';
import { onRepoDeleted } from './repos.js';

/**
 * The collection of a repository's unreferenced blobs (API §5.4), sent by the collector
 * (actors/system/blob-collector.ts) to the repository's own actor, so that deciding what is
 * unreferenced and deleting it happen in one transaction that no write of the repository can
 * interleave with. It works without the repository record too: a deleted repository can still
 * have staged chunks of uploads that were under way.
 */
export interface CollectBlobsInput {
  repo_id: string;
  /** Staged uploads of the repository the collector found older than the retention. */
  upload_ids: string[];
}

/** Objects deleted per turn, so that a backlog never holds the write lock for long. */
const OBJECTS_PER_TURN = 1000;

export const collectBlobsCommand = defineCommand<CollectBlobsInput>('blob.collect', (input, ctx) => {
  const cutoff = ctx.now.getTime() - ctx.settings.blobRetentionS * 1000;
  const result = collectRepository(ctx.storage, input.repo_id, cutoff, input.upload_ids, OBJECTS_PER_TURN);
  return { status: 200, body: result, schema: 'blobCollect' };
});

// Pending marks live outside the repository's key range: they go with the repository.
onRepoDeleted((ctx, repo) => dropAllPending(ctx.storage.meta, repo.id));
