import type { Config } from '../config.js';
import type { ActorRuntime } from '../actors/runtime.js';
import type { Storage } from '../storage/database.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import type { RecordCache } from '../storage/read/record-cache.js';
import type { SecretBox } from '../storage/secret-box.js';
import type { TokenVerifier } from './auth/token-verifier.js';
import type { Metrics } from './metrics.js';

/** What request handlers may use; built once by the server. */
export interface Services {
  config: Config;
  storage: Storage;
  /** Orgs, signing keys and webhook targets. */
  directory: OrgDirectory;
  /** Decoded repository records for the front end's reads (see record-cache.ts). */
  records: RecordCache;
  secrets: SecretBox;
  runtime: ActorRuntime;
  verifier: TokenVerifier;
  metrics: Metrics;
}
