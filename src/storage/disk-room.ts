import { statfsSync } from 'node:fs';
import { storageUnavailable } from '../errors.js';

/** Bodies at least this large (or of unknown length) are checked against the disk's free space. */
export const LARGE_BODY_BYTES = 1024 * 1024;

/**
 * Refuses a large body (503) when storing it would leave the data directory's disk with less
 * than `reserve` bytes free. A full disk is not a state to reach: LMDB's error path when a commit
 * of megabytes fails for want of space has aborted the process (docs/design.md, Known limits), so
 * large bodies stop while there is still room, and small writes go on. `incoming` is the body's
 * declared length (0 when it is not declared).
 */
export function assertDiskRoom(dataDir: string, incoming: number, reserve: number): void {
  const fs = statfsSync(dataDir);
  if (fs.bavail * fs.bsize - incoming < reserve) throw storageUnavailable('the disk holding the data is nearly full; large writes are refused until space is freed');
}
