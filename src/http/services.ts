import type { Config } from '../config.js';
import type { ActorCaller } from '../actors/actor-caller.js';
import type { RepoActivity } from '../actors/repo-activity.js';
import type { ShardOwnership } from '../actors/system/shard-ownership.js';
import type { Storage } from '../storage/database.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import type { RecordCache } from '../storage/read/record-cache.js';
import type { SecretBox } from '../storage/secret-box.js';
import type { TokenVerifier } from './auth/token-verifier.js';
import type { Metrics } from './metrics.js';
import type { RequestForwarding } from './forwarding.js';
import type { ShardReads } from './shard-reads.js';
import type { ReadFence } from './read-fence.js';

/** What request handlers may use; built once by the server. */
export interface Services {
  config: Config;
  storage: Storage;
  /** Orgs, signing keys and webhook targets. */
  directory: OrgDirectory;
  /** Decoded repository records for the front end's reads (see record-cache.ts). */
  records: RecordCache;
  /** Repositories whose actors settled calls, for the system actors that follow changes. */
  activity: RepoActivity;
  /** The shards this node serves, whose queues its system actors drain. */
  served: ShardOwnership;
  secrets: SecretBox;
  /** Sends commands to actors: the local runtime, or in a cluster the router to each shard's owner. */
  runtime: ActorCaller;
  verifier: TokenVerifier;
  metrics: Metrics;
  /** Cluster mode: where a request naming an org is served; null on a single node. */
  forwarding: RequestForwarding | null;
  /** Cluster mode: reads of records on other nodes' shards, for org-level reads; null on a single node. */
  shardReads: ShardReads | null;
  /** Cluster mode: answers what was read here once the shard logs hold it; null on a single node. */
  readFence: ReadFence | null;
}
