/**
 * What the server's own `/metrics` counted while a phase ran: LMDB's totals (every writer's:
 * the mailboxes', analytics', webhook deliveries') and the mailboxes' batches. Read before and
 * after a phase (warm-up included), so the figures are per actor call and per batch, not per
 * second. A metrics page that cannot be read leaves the figures out, not the phase.
 */
import { metricValue } from '../test/helpers/metrics-text.js';
import { round } from './phases.js';
import type { ServerWriteFigures } from './report-types.js';

export interface ServerCounters {
  /** LMDB write transactions, every writer's. */
  transactions: number;
  pagesWritten: number;
  syncSeconds: number;
  lockWaitSeconds: number;
  /** Mailbox batches, and the actor calls they answered (writes, refusals, system callers). */
  batches: number;
  calls: number;
  /** Sums over the batches: from the drain to the replies, and from the end of the commands. */
  drainToReplySeconds: number;
  commandsToReplySeconds: number;
}

/** LMDB's page size in the server's environment (lmdb-js's default on Linux). */
export const PAGE_BYTES = 4096;

export async function readServerCounters(metricsUrl: string | null): Promise<ServerCounters | null> {
  if (!metricsUrl) return null;
  const text = await fetch(metricsUrl)
    .then((r) => r.text())
    .catch(() => null);
  if (text === null) return null;
  return {
    transactions: metricValue(text, 'repohost_lmdb_transactions_total'),
    pagesWritten: metricValue(text, 'repohost_lmdb_pages_written_total'),
    syncSeconds: metricValue(text, 'repohost_lmdb_sync_seconds_total'),
    lockWaitSeconds: metricValue(text, 'repohost_lmdb_write_lock_wait_seconds_total'),
    batches: metricValue(text, 'repohost_actor_batch_size_count'),
    calls: metricValue(text, 'repohost_actor_queue_wait_seconds_count'),
    drainToReplySeconds: metricValue(text, 'repohost_lmdb_commit_seconds_sum'),
    commandsToReplySeconds: metricValue(text, 'repohost_lmdb_flush_seconds_sum'),
  };
}

/**
 * Runs `phase`, adding what the server counted meanwhile to `into` (nothing without its metrics:
 * `into` then stays at zero).
 */
export async function counting<T>(metricsUrl: string | null, into: ServerCounters, phase: () => Promise<T>): Promise<T> {
  const before = await readServerCounters(metricsUrl);
  const result = await phase();
  const after = await readServerCounters(metricsUrl);
  if (before && after) for (const k of Object.keys(into) as Array<keyof ServerCounters>) into[k] += after[k] - before[k];
  return result;
}

export const noCounters = (): ServerCounters => ({ transactions: 0, pagesWritten: 0, syncSeconds: 0, lockWaitSeconds: 0, batches: 0, calls: 0, drainToReplySeconds: 0, commandsToReplySeconds: 0 });

/** A write phase's figures per actor call and per mailbox batch; null when one was not counted. */
export function writeFigures(c: ServerCounters): ServerWriteFigures | null {
  if (!(c.calls > 0 && c.batches > 0 && Object.values(c).every((v) => Number.isFinite(v)))) return null;
  return {
    writesPerBatch: round(c.calls / c.batches, 1),
    pagesPerWrite: round(c.pagesWritten / c.calls, 1),
    kbPerWrite: round((c.pagesWritten * PAGE_BYTES) / c.calls / 1000, 1),
    drainToReplyMsPerBatch: round((c.drainToReplySeconds * 1000) / c.batches, 2),
    commandsToReplyMsPerBatch: round((c.commandsToReplySeconds * 1000) / c.batches, 2),
    lockWaitMsPerBatch: round((c.lockWaitSeconds * 1000) / c.batches, 2),
    syncMsPerBatch: round((c.syncSeconds * 1000) / c.batches, 2),
  };
}
