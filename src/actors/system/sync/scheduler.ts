/**
 * The sync actor's scheduler (main thread). The queue is durable: `['syncq', syncId]` entries in
 * LMDB, written by the repository actor when a sync is enqueued and removed when it finishes, so
 * a restart finds every unfinished sync where it was. Rules (API §9):
 * - one running sync per repository, the oldest first (ids sort by enqueue time);
 * - at most `concurrency` running in all, oldest repository head first;
 * - a transient failure goes back to `queued` with a backoff of base × 1, 3, 9, 27; the 5th
 *   failed try fails the sync; permanent failures fail it at once;
 * - a sync found `in_progress` without a running job (the server stopped mid-try) is put back
 *   to `queued` and tried again — the record stays the same one.
 * Every status change is a command to the repository's actor (`runtime.call`), which writes the
 * record and its event in one transaction; the network work runs in the sync worker thread.
 */
import type { Piscina } from 'piscina';
import { coalesced } from '../../../coalesced.js';
import { isServiceError } from '../../../errors.js';
import type { Services } from '../../../http/services.js';
import { log } from '../../../log.js';
import type { PrincipalMsg } from '../../../protocol/messages.js';
import type { SyncView } from '../../../protocol/views/sync.js';
import { getSync, syncQueueHeads, syncQueueLength } from '../../../storage/sync-store.js';
import type { SyncRecord } from '../../../storage/records.js';
import type { SyncJob, SyncJobResult } from './sync-worker.js';
import { repoActor } from '../../actor-names.js';
import { serveAllowance } from '../../allowance-port.js';

export const MAX_TRIES = 5;
/** Unfinished syncs are looked for this often even without a wake-up (e.g. a lost notification). */
const POLL_MS = 2000;
const CALL_RETRIES = 20;

export interface SchedulerOptions {
  concurrency: number;
  retryBaseMs: number;
}

function systemPrincipal(orgId: string): PrincipalMsg {
  return { orgId, orgSlug: '', keyId: '', keyName: 'upstream-sync', permissions: [], authors: [], restricted: false, allowedRepoIds: [] };
}

export function retryDelayMs(baseMs: number, attempt: number): number {
  return baseMs * 3 ** (attempt - 1);
}

export class SyncScheduler {
  private readonly running = new Map<string, Promise<void>>();
  private stopping = false;
  private readonly passSoon = coalesced(setImmediate, () => this.pass());
  private wakeTimer: NodeJS.Timeout | null = null;
  private wakeAt = Infinity;
  private readonly poll: NodeJS.Timeout;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly services: Services,
    private readonly pool: Piscina,
    private readonly options: SchedulerOptions,
  ) {
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.poll.unref();
    // Only the shards served here: a sync of another node's shard is its owner's to run.
    this.unsubscribe = services.served.onChange(() => this.wake());
  }

  /** Unfinished syncs (queued or running), for the queue-length gauge. */
  queueLength(): number {
    return syncQueueLength(this.services.storage.meta, this.services.served.ownedShards());
  }

  /** Looks at the queue soon (coalesced): after an enqueue, a finished job, a backoff expiry. */
  wake(): void {
    if (!this.stopping) this.passSoon();
  }

  private pass(): void {
    if (this.stopping) return;
    const { meta } = this.services.storage;
    const now = Date.now();
    let nextWake = Infinity;
    for (const { repoId, syncId } of syncQueueHeads(meta, this.services.served.ownedShards())) {
      if (this.running.size >= this.options.concurrency) break;
      if (this.running.has(repoId)) continue;
      const record = getSync(meta, repoId, syncId);
      if (!record || (record.status !== 'queued' && record.status !== 'in_progress')) continue;
      if (record.status === 'queued' && record.next_attempt_at > now) {
        nextWake = Math.min(nextWake, record.next_attempt_at);
        continue;
      }
      const job = this.run(record).finally(() => {
        this.running.delete(repoId);
        this.wake();
      });
      this.running.set(repoId, job);
    }
    this.scheduleWake(nextWake);
  }

  private scheduleWake(at: number): void {
    if (at === Infinity || at >= this.wakeAt) return;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.wakeAt = Infinity;
      this.wake();
    }, Math.max(0, at - Date.now()));
  }

  private async call<T>(record: SyncRecord, command: string, input: Record<string, unknown>): Promise<T> {
    for (let i = 0; ; i++) {
      try {
        const reply = await this.services.runtime.call({
          actor: repoActor(record.repo_id),
          command,
          input: { repo_id: record.repo_id, sync_id: record.id, ...input },
          principal: systemPrincipal(record.org_id),
          traceId: record.id,
        });
        return JSON.parse(Buffer.from(reply.body).toString('utf8')) as T;
      } catch (err) {
        // A full mailbox or a restarting worker: the command is simply tried again shortly.
        const busy = isServiceError(err) && (err.code === 'RATE_LIMITED' || err.code === 'UNAVAILABLE');
        if (!busy || this.stopping || i >= CALL_RETRIES) throw err;
        await new Promise((r) => setTimeout(r, 100 * (i + 1)));
      }
    }
  }

  private async run(record: SyncRecord): Promise<void> {
    try {
      let attempt = record.attempt;
      if (record.status === 'in_progress') {
        // Interrupted by a stop or crash: back to queued (one more sync.queued), then a new try.
        await this.call(record, 'sync.retry', { attempt, delay_ms: 0 });
      }
      attempt = (await this.call<SyncView>(record, 'sync.start', {})).attempt;
      const job: SyncJob = { sync_id: record.id, repo_id: record.repo_id, direction: record.direction, ref_globs: record.ref_globs };
      const { runtime, config } = this.services;
      const allowance = record.direction === 'pull' && config.orgQuotaBytes > 0 ? serveAllowance(runtime, record.org_id, record.repo_id, record.id) : null;
      let result: SyncJobResult;
      try {
        if (allowance) job.quota_port = allowance.port;
        result = (await this.pool.run(job, allowance ? { transferList: [allowance.port] } : undefined)) as SyncJobResult;
      } catch {
        // The worker died or is being stopped. When stopping, the record stays in_progress and
        // the next start retries it; otherwise this try counts as a transient failure.
        if (this.stopping) return;
        result = { ok: false, transient: true, message: 'the sync worker stopped during the try' };
      } finally {
        allowance?.close();
      }
      const tried = { attempt };
      if (result.ok) {
        if ('pulled' in result) await this.call(record, 'sync.apply-pull', { ...tried, head: result.pulled.head, refs: result.pulled.refs });
        else await this.call(record, 'sync.complete-push', { ...tried, refs: result.pushed });
      } else if (result.transient && attempt < MAX_TRIES) {
        await this.call(record, 'sync.retry', { ...tried, delay_ms: retryDelayMs(this.options.retryBaseMs, attempt) });
      } else {
        const error = result.transient ? `${result.message} (gave up after ${attempt} tries)` : result.message;
        await this.call(record, 'sync.fail', { ...tried, error });
      }
    } catch (err) {
      await this.afterCommandFailure(record, err);
    }
  }

  /** A command of the try failed: the repository or sync is gone, a race, or applying failed. */
  private async afterCommandFailure(record: SyncRecord, err: unknown): Promise<void> {
    if (isServiceError(err) && (err.code === 'REPO_NOT_FOUND' || err.code === 'NOT_FOUND' || err.code === 'ABORTED')) {
      log.debug('sync dropped', { sync_id: record.id, reason: err.message });
      return;
    }
    if (this.stopping) return;
    const current = getSync(this.services.storage.meta, record.repo_id, record.id);
    if (current?.status !== 'in_progress') {
      log.error('sync command failed', { sync_id: record.id, error: (err as Error).message });
      return;
    }
    const message = isServiceError(err) ? err.message : 'internal error';
    log.error('applying a sync failed', { sync_id: record.id, error: message });
    try {
      await this.call(current, 'sync.fail', { attempt: current.attempt, error: `could not apply the sync: ${message}` });
    } catch (again) {
      log.error('recording a failed sync failed', { sync_id: record.id, error: (again as Error).message });
    }
  }

  /** Stops scheduling; running tries get `graceMs` to finish, the rest resume after a restart. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    clearInterval(this.poll);
    this.unsubscribe();
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    const all = Promise.allSettled([...this.running.values()]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    await this.pool.destroy();
    await all;
  }
}
