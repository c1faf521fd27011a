import { removeRepositoryChunks } from '../../storage/blob-store.js';
import { defineCommand } from '../command.js';
import { writeChange, type ChangeWriteInput } from './apply-ops.js';
import { onRepoDeleted } from './repos.js';

/** `POST …/changes` and `PATCH …/changes/{id}` (API §5.3): the apply-ops write with a Change reply. */
export const createChangeCommand = defineCommand<ChangeWriteInput>('change.create', (input, ctx) => {
  const result = writeChange(ctx, input, 'change.create');
  return { status: 201, body: result.w.view(result.record), schema: 'change' };
});

export const updateChangeCommand = defineCommand<ChangeWriteInput>('change.update', (input, ctx) => {
  const result = writeChange(ctx, input, 'change.update');
  return { status: 200, body: result.w.view(result.record), schema: 'change' };
});

// Large blobs' chunks live outside the repository's key ranges: remove them with the repository.
onRepoDeleted((ctx, repo) => removeRepositoryChunks(ctx.storage, repo.id));
