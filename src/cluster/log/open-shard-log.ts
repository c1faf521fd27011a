import type { ClusterConfig } from '../../config.js';
import type { ShardLog } from '../shard-log.js';

/**
 * The shard log of `REPOHOST_SHARD_LOG`. The backend's module (and its client library) is loaded
 * here on demand, so a single node never loads NATS or etcd code.
 */
export async function openShardLog(cluster: ClusterConfig): Promise<ShardLog> {
  if (cluster.shardLog === 'etcd') {
    const { EtcdShardLog } = await import('./etcd-log.js');
    return new EtcdShardLog({ hosts: cluster.etcd, cluster: cluster.name });
  }
  const { JetStreamShardLog } = await import('./jetstream-log.js');
  return JetStreamShardLog.open({ servers: cluster.nats, cluster: cluster.name, replicas: cluster.shardLogReplicas });
}
