import type { ShardColumnSource } from '../control/cluster-status.js';
import { decodeProgress } from '../control/records.js';

/**
 * `repohost cluster status`'s `log` column: the shard log sequence the owner reports as its last
 * acknowledged append (replicas report owned shards as well as followed ones), at the placement's
 * current epoch. Beside the followers' `lag`, it shows how far the log has gone.
 */
export const logPositionColumn: ShardColumnSource = {
  name: 'log',
  async read(client, keys, placement) {
    const res = await client.getAll().prefix(keys.progress).exec();
    const applied = new Map<string, Record<string, { epoch: number; applied: number }>>();
    for (const kv of res.kvs) {
      const p = decodeProgress(kv.value.toString('utf8'));
      if (p) applied.set(kv.key.toString('utf8').slice(keys.progress.length), p.shards);
    }
    const out = new Map<number, number>();
    for (const [shard, p] of placement) {
      const own = applied.get(p.owner)?.[String(shard)];
      if (own && own.epoch === p.epoch) out.set(shard, own.applied);
    }
    return out;
  },
};
