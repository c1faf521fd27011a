import { aborted, invalid, notFound } from '../../errors.js';
import { syncView, type SyncView } from '../../protocol/views/sync.js';
import { putRepo } from '../../storage/repo-store.js';
import { dequeueSync, getSync, indexNewSync, offerLatestSync, saveSyncRecord, unindexRepoSyncs } from '../../storage/sync-store.js';
import { newId } from '../../storage/ids.js';
import { assertRoom } from '../../storage/quota.js';
import type { SyncDirection, SyncRecord, SyncRefStat, SyncStatus } from '../../storage/records.js';
import { defineCommand, type CommandContext, type CommandResult } from '../command.js';
import { RepoWrite } from './repo-writes.js';
import { applyPull, type PulledRefs } from '../system/sync/pull-apply.js';
import type { RefGlobs } from '../system/sync/ref-filter.js';
import { repoScope, type RepoScope } from './bookmarks.js';
import { onRepoDeleted } from './repos.js';

/**
 * Upstream sync records (API §9), written only here, in the repository's actor: enqueueing,
 * every status transition the sync actor asks for, and a pull's ref updates. Each transition
 * emits its `sync.<status>` event in the same transaction, and keeps `sync-latest` (the
 * repository view's `upstream.latest_sync`) current. The network never comes in here: the sync
 * actor fetches first and hands over only the result.
 */

export interface EnqueueSyncInput {
  repo_id: string;
  direction: SyncDirection;
  ref_globs: RefGlobs;
}

export interface StartSyncInput {
  repo_id: string;
  sync_id: string;
}

/** Guards of the transitions out of `in_progress`: the try they finish must be the current one. */
interface RunningSyncInput {
  repo_id: string;
  sync_id: string;
  attempt: number;
}

export interface RetrySyncInput extends RunningSyncInput {
  /** Wait before the next try (0 for a try interrupted by a restart). */
  delay_ms: number;
}

export interface FailSyncInput extends RunningSyncInput {
  error: string;
}

export interface CompletePushInput extends RunningSyncInput {
  refs: SyncRefStat[];
}

export interface ApplyPullInput extends RunningSyncInput, PulledRefs {}

function loadSync(ctx: CommandContext, repoId: string, syncId: string): SyncRecord {
  const record = getSync(ctx.storage.meta, repoId, syncId);
  if (!record) throw notFound('NOT_FOUND', `sync ${syncId} not found`);
  return record;
}

function runningSync(ctx: CommandContext, input: RunningSyncInput): SyncRecord {
  const record = loadSync(ctx, input.repo_id, input.sync_id);
  if (record.status !== 'in_progress' || record.attempt !== input.attempt) {
    throw aborted(`sync ${record.id} is ${record.status} (try ${record.attempt}), not running try ${input.attempt}`);
  }
  return record;
}

/** Stores the record, emits `sync.<status>`, and keeps the repository's latest-sync copy. */
function saveSync(ctx: CommandContext, scope: RepoScope, record: SyncRecord, status: SyncStatus): SyncView {
  const { meta } = ctx.storage;
  record.status = status;
  saveSyncRecord(meta, record);
  const view = syncView(record);
  offerLatestSync(meta, record.repo_id, view);
  if (status === 'completed' || status === 'failed') dequeueSync(meta, record.repo_id, record.id);
  ctx.mutation.emit(`sync.${status}`, scope.org, scope.repo, { sync: view });
  return view;
}

function recordOperation(ctx: CommandContext, scope: RepoScope, kind: string, summary: Record<string, unknown>): string {
  const id = ctx.mutation.operation(scope.repo, kind, summary);
  putRepo(ctx.storage.meta, scope.repo);
  return id;
}

function finish(ctx: CommandContext, scope: RepoScope, record: SyncRecord, status: 'completed' | 'failed', result: { refs: SyncRefStat[] } | { error: string }): CommandResult {
  record.finished_at = ctx.now.toISOString();
  if ('refs' in result) {
    record.stats = { refs: result.refs };
    record.error = null;
  } else {
    record.stats = null;
    record.error = result.error;
  }
  recordOperation(ctx, scope, `sync.${status}`, { sync_id: record.id, direction: record.direction });
  return { status: 200, body: saveSync(ctx, scope, record, status), schema: 'sync' };
}

export const enqueueSync = defineCommand<EnqueueSyncInput>('sync.enqueue', (input, ctx) => {
  const { meta } = ctx.storage;
  const scope = repoScope(ctx, input.repo_id);
  const { repo } = scope;
  if (!repo.upstream) throw invalid('the repository has no upstream configured; set one with PATCH first');
  // A pull adds objects: refused up front when the shard has no allowance left (the front end
  // then asks the org for some and sends this again, actor-call.ts; a pull that would take the
  // org over fails when its fetch finds out, fetch-job.ts).
  if (input.direction === 'pull') assertRoom(meta, repo.org_id, repo.id, ctx.settings.orgQuotaBytes, 0);
  const record: SyncRecord = {
    id: newId('sync'),
    repo_id: repo.id,
    org_id: repo.org_id,
    direction: input.direction,
    status: 'queued',
    attempt: 0,
    ref_globs: input.ref_globs,
    stats: null,
    error: null,
    created_at: ctx.now.toISOString(),
    started_at: null,
    finished_at: null,
    next_attempt_at: 0,
  };
  indexNewSync(meta, record);
  recordOperation(ctx, scope, 'sync.enqueue', { sync_id: record.id, direction: record.direction });
  return { status: 201, body: saveSync(ctx, scope, record, 'queued'), schema: 'sync' };
});

export const startSync = defineCommand<StartSyncInput>('sync.start', (input, ctx) => {
  const scope = repoScope(ctx, input.repo_id);
  const record = loadSync(ctx, input.repo_id, input.sync_id);
  if (record.status !== 'queued') throw aborted(`sync ${record.id} is ${record.status}, not queued`);
  record.attempt += 1;
  record.started_at = ctx.now.toISOString();
  record.finished_at = null;
  record.error = null;
  record.stats = null;
  return { status: 200, body: saveSync(ctx, scope, record, 'in_progress'), schema: 'sync' };
});

export const retrySync = defineCommand<RetrySyncInput>('sync.retry', (input, ctx) => {
  const scope = repoScope(ctx, input.repo_id);
  const record = runningSync(ctx, input);
  // A queued record shows no try in progress (API §11.2): times, stats and error are cleared.
  record.started_at = null;
  record.finished_at = null;
  record.error = null;
  record.stats = null;
  record.next_attempt_at = ctx.now.getTime() + input.delay_ms;
  return { status: 200, body: saveSync(ctx, scope, record, 'queued'), schema: 'sync' };
});

export const failSync = defineCommand<FailSyncInput>('sync.fail', (input, ctx) => {
  const scope = repoScope(ctx, input.repo_id);
  return finish(ctx, scope, runningSync(ctx, input), 'failed', { error: input.error });
});

export const completePush = defineCommand<CompletePushInput>('sync.complete-push', (input, ctx) => {
  const scope = repoScope(ctx, input.repo_id);
  const record = runningSync(ctx, input);
  if (record.direction !== 'push') throw invalid(`sync ${record.id} is a ${record.direction}`);
  return finish(ctx, scope, record, 'completed', { refs: input.refs });
});

/**
 * A pull's result as ONE mutation: imported changes, bookmark moves and creations, tags, notes,
 * their events, one `push` event when anything changed, and the completed sync record.
 */
export const applyPulledRefs = defineCommand<ApplyPullInput>('sync.apply-pull', (input, ctx) => {
  const w = new RepoWrite(ctx, input.repo_id, { announceChanges: false });
  const record = runningSync(ctx, input);
  if (record.direction !== 'pull') throw invalid(`sync ${record.id} is a ${record.direction}`);
  const outcome = applyPull(ctx, w, record, { head: input.head, refs: input.refs });
  if (outcome.changed) {
    w.finish('sync.pull', {
      sync_id: record.id,
      refs_updated: outcome.stats.filter((s) => s.outcome === 'updated').map((s) => s.name),
      changes_created: outcome.reconciliation.changes_created_count,
    });
    ctx.mutation.emit('push', w.org, w.repo, { updates: outcome.updates, reconciliation: outcome.reconciliation });
  }
  return finish(ctx, w, record, 'completed', { refs: outcome.stats });
});

// A deleted repository takes its syncs along: its own range goes with the repository; the org's
// sync-run index and the queue are cleaned here through the repository's cleanup index.
onRepoDeleted((ctx, repo) => unindexRepoSyncs(ctx.storage.meta, repo.org_id, repo.id));

export const syncCommands = [enqueueSync, startSync, retrySync, failSync, completePush, applyPulledRefs];
