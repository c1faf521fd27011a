import { chmodSync, closeSync, copyFileSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { invalid } from '../errors.js';
import type { Storage } from './database.js';

export interface BackupResult {
  /** Size of the copied LMDB file. */
  bytes: number;
  /** Whether the data directory had a `secret.key` to copy (it has once a server has started on it). */
  secretKey: boolean;
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copies a data directory into `target` while a server may be writing to it: the LMDB environment
 * from one read snapshot (compacted, so free pages are left out) and `secret.key`, without which
 * the copy's sealed upstream credentials and webhook secrets could never be opened. `target` then
 * is a data directory a server can start on. Everything is fsynced before this returns, so a
 * backup that was reported done survives a crash of the machine.
 */
export async function backupDataDir(storage: Storage, dataDir: string, target: string): Promise<BackupResult> {
  if (existsSync(target) && readdirSync(target).length > 0) throw invalid(`backup target ${target} is not empty`);
  const db = join(target, 'db');
  mkdirSync(db, { recursive: true });
  await storage.root.backup(db, true);
  const secret = join(dataDir, 'secret.key');
  const secretKey = existsSync(secret);
  if (secretKey) {
    copyFileSync(secret, join(target, 'secret.key'));
    chmodSync(join(target, 'secret.key'), 0o600);
    fsyncPath(join(target, 'secret.key'));
  }
  const file = join(db, 'data.mdb');
  fsyncPath(file);
  fsyncPath(db);
  fsyncPath(target);
  return { bytes: statSync(file).size, secretKey };
}
