import type { Command } from '../command.js';
import { deleteRepo, initRepo, settleRepoStep, updateRepo } from './repos.js';
import { repoNameCommands } from './repo-names.js';
import { syncCommands } from './syncs.js';
import { webhookCommands } from './webhooks.js';
import { createBookmark, moveBookmark, removeBookmark } from './bookmarks.js';
import { mergeBookmarks } from './merge.js';
import { applyOpsCommand, storeBlobCommand } from './apply-ops.js';
import { createChangeCommand, updateChangeCommand } from './changes.js';
import { collectBlobsCommand } from './blob-collect.js';
import { pushCommand } from './push.js';
import { quotaCommands } from './quota.js';

/** Every command the actors understand; the worker loads this module by default. */
export const commands: Command[] = [...repoNameCommands, initRepo, updateRepo, deleteRepo, settleRepoStep, createBookmark, moveBookmark, removeBookmark, mergeBookmarks, applyOpsCommand, storeBlobCommand, createChangeCommand, updateChangeCommand, collectBlobsCommand, pushCommand, ...syncCommands, ...webhookCommands, ...quotaCommands];
