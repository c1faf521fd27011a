import type { Etcd3 } from 'etcd3';
import type { ControlKeys } from './keys.js';

/**
 * Drain requests: while `drain/<id>` exists the controller moves every shard node `id` owns or
 * follows elsewhere (gracefully, within the rebalancing limits) and gives it nothing new. The key
 * is not bound to a lease, so a drain survives the node's restart until the key is deleted.
 */
export async function requestDrain(client: Etcd3, keys: ControlKeys, nodeId: string): Promise<void> {
  await client.put(keys.drainOf(nodeId)).value(JSON.stringify({ requestedAt: new Date().toISOString() }));
}
