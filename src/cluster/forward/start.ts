import type { ActorCaller } from '../../actors/actor-caller.js';
import type { ActorRuntime } from '../../actors/runtime.js';
import type { ClusterConfig } from '../../config.js';
import type { RequestForwarding } from '../../http/forwarding.js';
import type { ReadFence } from '../../http/read-fence.js';
import type { ShardReads } from '../../http/shard-reads.js';
import type { RecordReader } from '../../storage/read/record-cache.js';
import type { Storage } from '../../storage/database.js';
import type { Registry } from 'prom-client';
import type { PlacementView } from '../placement.js';
import { ActorListener } from './actor-listener.js';
import { ActorRouter } from './actor-router.js';
import { ForwardMetrics } from './forward-metrics.js';
import { PeerSessions } from './peer-sessions.js';
import { RequestForwarder } from './request-forwarder.js';
import type { ServeGate } from './serve-gate.js';
import { ShardGather } from './shard-gather.js';
import { ShardOwners } from './shard-owners.js';
import { serveShardSnapshot } from './shard-snapshot.js';

/** A node's forwarding: what its routes send actor messages through, and where its front end places requests. */
export interface Forwarding {
  actors: ActorCaller;
  requests: RequestForwarding;
  /** Reads of other nodes' shards for the org-level reads. */
  reads: ShardReads;
  /** The internal listener's port (the one REPOHOST_NODE_INTERNAL_URL names, or the one given for port 0). */
  internalPort: number;
  close(): Promise<void>;
}

export interface ForwardingParts {
  cluster: ClusterConfig;
  /** The local actors: what this node runs for the shards it owns. */
  runtime: ActorRuntime;
  records: RecordReader;
  /** This node's storage as opened: peers read keys and lists of its shards, and copy whole shards from it (shard-snapshot.ts). */
  storage: Storage;
  registry: Registry;
  view: PlacementView;
  gate: ServeGate;
  /** What this node reads of its shards for peers and gathers is sent once their logs hold it. */
  fence: ReadFence;
}

/** Starts the internal HTTP/2 listener and builds the router and the front end's placement. */
export async function startForwarding(parts: ForwardingParts): Promise<Forwarding> {
  const owners = new ShardOwners(parts.view, parts.gate);
  const metrics = new ForwardMetrics(parts.registry);
  const peers = new PeerSessions(parts.cluster.leaseTtlS * 1000);
  const listener = new ActorListener(parts.runtime, parts.storage.meta, owners, metrics, (req, res) => serveShardSnapshot(parts.storage, req, res), parts.fence);
  const internal = new URL(parts.cluster.internalUrl);
  const internalPort = await listener.listen(internal.hostname.replace(/^\[(.*)\]$/, '$1'), Number(internal.port));
  const requests = new RequestForwarder(owners, parts.records, metrics);
  return {
    actors: new ActorRouter(parts.runtime, owners, peers, metrics),
    requests,
    reads: new ShardGather(parts.storage.meta, owners, peers, metrics, parts.fence),
    internalPort,
    async close() {
      await listener.close();
      peers.close();
      await requests.close();
    },
  };
}
