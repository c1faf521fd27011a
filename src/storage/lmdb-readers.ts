import type { RootDatabase } from 'lmdb';
import { log } from '../log.js';

/**
 * LMDB's reader table, shared by every process that opens the environment. A read transaction
 * pins its snapshot: pages that later commits free are reused only once every snapshot older
 * than them has ended, so one long reader makes every write meanwhile take new pages at the
 * file's end (and its sync costs more).
 */

/** How often slots left by dead processes are cleared. */
const STALE_CHECK_MS = 1000;

/**
 * Write transactions committed since the oldest open snapshot (of any process) began; 0 when none
 * is open. An idle slot lists its transaction id as `-`.
 */
export function oldestReaderLag(root: RootDatabase): number {
  const last = (root.getStats() as { lastTxnId: number }).lastTxnId;
  let oldest = last;
  for (const line of root.readerList().split('\n')) {
    const txnId = Number(line.trim().split(/\s+/)[2]);
    if (Number.isSafeInteger(txnId) && txnId < oldest) oldest = txnId;
  }
  return last - oldest;
}

/**
 * A process that dies inside a read transaction (a CLI command killed with -9) leaves its slot
 * holding its snapshot, and LMDB clears such slots only when a process opens the environment: the
 * file would grow with every write until the next start. The server clears them every
 * STALE_CHECK_MS.
 */
export function clearStaleReaders(root: RootDatabase): { stop(): void } {
  const timer = setInterval(() => {
    const cleared = root.readerCheck();
    if (cleared > 0) log.warn('cleared the read snapshots of processes that died', { readers: cleared });
  }, STALE_CHECK_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
