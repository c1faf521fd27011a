import type { Config } from '../config.js';
import { directoryLocation, type DirectoryLocation } from '../cluster/org-directory/open-org-directory.js';

/** The part of the configuration actors need; passed to every worker as workerData. */
export interface ActorSettings {
  dataDir: string;
  publicUrl: string;
  brand: string;
  allowPrivateWebhooks: boolean;
  allowPrivateUpstreams: boolean;
  orgQuotaBytes: number;
  blobRetentionS: number;
  logLevel: string;
  /** Where the org directory lives (etcd in cluster mode); every worker opens its own. */
  orgDirectory: DirectoryLocation | null;
}

export function actorSettings(config: Config): ActorSettings {
  return {
    dataDir: config.dataDir,
    publicUrl: config.publicUrl,
    brand: config.brand,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    allowPrivateUpstreams: config.allowPrivateUpstreams,
    orgQuotaBytes: config.orgQuotaBytes,
    blobRetentionS: config.blobRetentionS,
    logLevel: config.logLevel,
    orgDirectory: directoryLocation(config),
  };
}
