import { removeRepositoryChunks } from '../../storage/blob-store.js';
import { defineCommand } from '../command.js';
import { prepareWriteOps, writeChange, type ChangeWriteInput, type PreparedBlobs } from './apply-ops.js';
import { onRepoDeleted } from './repos.js';

/** `POST …/changes` and `PATCH …/changes/{id}` (API §5.3): the apply-ops write with a Change reply. */
function changeWriteCommand(name: 'change.create' | 'change.update', status: number) {
  return defineCommand<ChangeWriteInput, PreparedBlobs>(
    name,
    (input, ctx, prepared) => {
      const result = writeChange(ctx, input, prepared, name);
      return { status, body: result.w.view(result.record), schema: 'change' };
    },
    prepareWriteOps,
  );
}

export const createChangeCommand = changeWriteCommand('change.create', 201);
export const updateChangeCommand = changeWriteCommand('change.update', 200);

// Large blobs' chunks live outside the repository's key ranges: remove them with the repository.
onRepoDeleted((ctx, repo) => removeRepositoryChunks(ctx.storage, repo.id));
