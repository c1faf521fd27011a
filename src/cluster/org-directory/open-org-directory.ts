import type { Config } from '../../config.js';
import type { Storage } from '../../storage/database.js';
import { LmdbOrgDirectory } from '../../storage/lmdb-org-directory.js';
import type { OrgDirectory } from '../../storage/org-directory.js';

/** Where a cluster's org directory lives; null on a single node (the data directory's LMDB). */
export interface DirectoryLocation {
  cluster: string;
  etcd: string[];
}

export function directoryLocation(config: Config): DirectoryLocation | null {
  return config.cluster && { cluster: config.cluster.name, etcd: config.cluster.etcd };
}

export interface OpenedOrgDirectory {
  directory: OrgDirectory;
  close(): Promise<void>;
}

/**
 * The org directory a thread reads and writes: the local one, or in cluster mode one loaded from
 * etcd and following it (each thread that reads the directory holds its own: docs/design.md, "The
 * org directory"). The etcd client is imported only then, so a single node never loads it.
 * `secretFingerprint`, given by a node's main thread, is checked against the cluster's.
 */
export async function openOrgDirectory(storage: Storage, location: DirectoryLocation | null, secretFingerprint?: string): Promise<OpenedOrgDirectory> {
  if (!location) return { directory: new LmdbOrgDirectory(storage), close: () => Promise.resolve() };
  const { EtcdOrgDirectory } = await import('./etcd-org-directory.js');
  if (secretFingerprint !== undefined) {
    const { createEtcdClient } = await import('../control/etcd-client.js');
    const { agreeOnSecretKey } = await import('./secret-key-check.js');
    const client = createEtcdClient({ endpoints: location.etcd });
    try {
      await agreeOnSecretKey(client, location.cluster, secretFingerprint);
    } finally {
      client.close();
    }
  }
  const directory = await EtcdOrgDirectory.open(location.etcd, location.cluster);
  return { directory, close: () => directory.close() };
}
