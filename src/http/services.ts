import type { Config } from '../config.js';
import type { ActorRuntime } from '../actors/runtime.js';
import type { Storage } from '../storage/database.js';
import type { SecretBox } from '../storage/secret-box.js';
import type { TokenVerifier } from './auth/token-verifier.js';
import type { Metrics } from './metrics.js';

/** What request handlers may use; built once by the server. */
export interface Services {
  config: Config;
  storage: Storage;
  secrets: SecretBox;
  runtime: ActorRuntime;
  verifier: TokenVerifier;
  metrics: Metrics;
}
