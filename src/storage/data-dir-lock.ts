import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { createServer } from 'node:net';

export interface DataDirLock {
  release(): void;
}

/**
 * One server per data directory. A second would run its own actors for every repository beside
 * the first's (no single writer any more) and keep cached records the other changes under it.
 *
 * The lock is a Unix socket in Linux's abstract namespace, named after the directory's real path:
 * the kernel drops it when the process ends, however it ends (`kill -9` included), so a restart
 * never finds a stale lock. It is per network namespace: two containers sharing one volume do not
 * see each other's. The CLI's short commands (org, key, export) take no lock: they are meant to
 * run beside a server. Elsewhere than Linux there is no abstract namespace, and no lock.
 */
export function lockDataDir(dataDir: string): Promise<DataDirLock> {
  if (process.platform !== 'linux') return Promise.resolve({ release() {} });
  const name = `\0repohost-data:${createHash('sha256').update(realpathSync(dataDir)).digest('hex')}`;
  const server = createServer((socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'EADDRINUSE' ? new Error(`another repohost server is already serving ${dataDir}`) : err);
    });
    server.listen(name, () => {
      server.unref();
      resolve({ release: () => server.close() });
    });
  });
}
