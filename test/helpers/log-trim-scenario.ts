import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import { openShardLog } from '../../src/cluster/log/open-shard-log.js';
import { ShardLogTrimmed } from '../../src/cluster/shard-log.js';
import { loadConfig } from '../../src/config.js';
import { repoShard } from '../../src/storage/shards.js';
import { openStorage } from '../../src/storage/database.js';
import { CLI_NODE_SETTINGS } from './cluster-settings.js';
import type { TestCluster } from './cluster.js';
import { shardEntries } from './shard-entries.js';
import { checkAcknowledged, createRepos, writeLoad } from './replica-scenarios.js';

/**
 * Settings of a cluster whose owners trim their logs often, and whose controller places a node
 * back on every shard within a few rounds (8 shards a round would take a minute or more).
 */
export const TRIM_EVERY = 10;
export const TRIM_ENV = { REPOHOST_LOG_TRIM_ENTRIES: String(TRIM_EVERY), REPOHOST_REBALANCE_MAX_MOVES: '64' };

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Owners trim their logs under write load (REPOHOST_LOG_TRIM_ENTRIES=TRIM_EVERY): the log of a
 * written shard no longer holds its first entries. A follower's data directory is then wiped and
 * the node started again: the log cannot rebuild its copies of the written shards, so they are
 * copied from peers and tailed from there. Once writes stop, such a copy equals its owner's byte
 * for byte, and every acknowledged write reads back through the node.
 */
export async function logTrimScenario(t: Test, cluster: TestCluster): Promise<void> {
  const [n1] = cluster.nodes;
  await cluster.settled();
  const repos = await createRepos(n1!, 4);
  const shard = repoShard(repos[0]!.id);
  const log = await openShardLog(loadConfig({ ...cluster.env, ...CLI_NODE_SETTINGS }).cluster!);
  t.teardown(() => log.close());
  const load = writeLoad(() => cluster.live(), repos.map((r) => r.name));

  await until(`the log of shard ${shard} is trimmed`, 60_000, () => log.read(shard, 0, 1).then(() => false, (err: unknown) => err instanceof ShardLogTrimmed));
  const owner = await cluster.ownerOf(shard, n1);
  t.ok((await owner.status()).shards[shard]!.trimmedTo > 0, `${owner.id} trimmed shard ${shard}'s log (${load.acked.length} writes acknowledged so far)`);
  await t.rejects(log.read(shard, 0, 1), ShardLogTrimmed, "the log no longer holds the shard's first entries");

  // Every node follows every shard (3 nodes, 3 copies): wipe one's copies. The written shards'
  // logs are trimmed: only a copy from a peer brings the node past the trimmed entries.
  const wiped = cluster.nodes.find((n) => n !== owner)!;
  const trimmed = new Map<number, number>();
  for (const repo of repos) {
    const s = repoShard(repo.id);
    const to = (await (await cluster.ownerOf(s, owner)).status()).shards[s]!.trimmedTo;
    if (to > 0) trimmed.set(s, to);
  }
  await wiped.kill();
  rmSync(join(wiped.dataDir, 'db'), { recursive: true, force: true });
  const restartedAt = Date.now();
  await wiped.restart();
  t.teardown(() => {
    if (process.env.REPLICA_DEBUG) writeFileSync('/tmp/log-trim-wiped.log', wiped.logs.join('\n'));
  });
  // The controller places the node again shard by shard: the first trimmed one it follows will do.
  let seeded = -1;
  await until(`${wiped.id} follows a trimmed shard past its trimmed entries`, 60_000, async () => {
    const shards = (await wiped.status()).shards;
    seeded = [...trimmed].find(([s, to]) => shards[s]!.state === 'follower' && shards[s]!.applied > to)?.[0] ?? -1;
    return seeded >= 0;
  });
  t.comment(`${wiped.id} wiped and back: following shard ${seeded} past ${trimmed.get(seeded)} after ${Date.now() - restartedAt} ms`);
  const copies = wiped.logs.filter((l) => l.includes('"shard copied from a peer"')).map((l) => JSON.parse(l) as { shard: number; bytes: number; transfer_ms: number; import_ms: number });
  t.ok(copies.some((c) => c.shard === seeded), `${wiped.id} took shard ${seeded} from a peer (${copies.length} copies so far)`);
  const bytes = copies.reduce((n, c) => n + c.bytes, 0);
  const ms = copies.reduce((n, c) => n + c.transfer_ms + c.import_ms, 0);
  t.comment(`copies: ${(bytes / 1048576).toFixed(2)} MiB in ${ms} ms of transfer and import (summed)`);

  // Writes go on after the copy: the node tails them.
  await new Promise((r) => setTimeout(r, 3000));
  await load.stop();
  t.comment(`${load.acked.length} writes acknowledged, ${load.failures} refused or failed`);
  // Another copy to compare with (the node may own the shard by now: moves bring shards back to it).
  const placement = (await wiped.status()).shards[seeded]!.placement!;
  const owner2 = cluster.nodes.find((n) => n.id === placement.owner)!;
  const source = cluster.nodes.find((n) => n !== wiped && [placement.owner, ...placement.followers].includes(n.id))!;
  const end = (await owner2.status()).shards[seeded]!;
  t.comment(`shard ${seeded}: the log's last sequence ${await log.last(seeded)}, trimmed up to ${end.trimmedTo} by ${owner2.id}`);
  for (const copy of [wiped, source]) {
    await until(`${copy.id} applies shard ${seeded} up to its owner`, 20_000, async () => (await copy.status()).shards[seeded]!.applied === end.applied);
  }

  // The seeded copy, tailed since, is the owner's byte for byte.
  const ownerCopy = openStorage(source.dataDir);
  const wipedCopy = openStorage(wiped.dataDir);
  const want = shardEntries(ownerCopy, seeded);
  const got = shardEntries(wipedCopy, seeded);
  await Promise.all([ownerCopy.close(), wipedCopy.close()]);
  const diff = [...want].filter(([k, v]) => got.get(k) !== v).map(([k]) => k).concat([...got.keys()].filter((k) => !want.has(k)));
  t.same(diff.slice(0, 10), [], `${wiped.id}'s copy of shard ${seeded} equals ${source.id}'s (${want.size} entries)`);
  await checkAcknowledged(t, [wiped], load.acked);
}
