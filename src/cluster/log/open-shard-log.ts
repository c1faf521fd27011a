import type { ClusterConfig } from '../../config.js';
import type { ShardLog } from '../shard-log.js';
import { PieceShardLog } from './piece-log.js';

/**
 * The shard log of `REPOHOST_SHARD_LOG`, taking records of any size (piece-log.ts). The backend's
 * module (and its client library) is loaded here on demand, so a single node never loads NATS or
 * etcd code.
 */
export async function openShardLog(cluster: ClusterConfig): Promise<ShardLog> {
  if (cluster.shardLog === 'etcd') {
    const { EtcdShardLog } = await import('./etcd-log.js');
    const log = new EtcdShardLog({ hosts: cluster.etcd, cluster: cluster.name });
    return new PieceShardLog(log, log.maxEntryBytes);
  }
  const { JetStreamShardLog } = await import('./jetstream-log.js');
  const log = await JetStreamShardLog.open({ servers: cluster.nats, cluster: cluster.name, replicas: cluster.shardLogReplicas });
  return new PieceShardLog(log, log.maxEntryBytes);
}
