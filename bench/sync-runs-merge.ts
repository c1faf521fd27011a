/**
 * `node dist/bench/sync-runs-merge.js [--rounds 9] [--listings 2000]`: what reading the org's sync
 * runs costs on one node now that each shard keeps its own part of the list (sync-store.ts).
 *
 * One data directory holds a busy neighbourhood (40 orgs of 20 repositories with 25 syncs each,
 * spread over all 256 shards) and the org being listed, in three sizes: `small` (3 repositories,
 * 5 syncs each), `large` (200 repositories, 10 syncs each) and `huge` (1,000 repositories, 2 syncs
 * each: more than `orgSyncLists` reads shards from). Its runs are kept both ways: per shard (the
 * current layout) and as one list on the org's shard (layout 3), so that the reads meet the same
 * LMDB. Variants, alternated round by round: `one-list` (layout 3's single range), `all-shards`
 * (a merge of all 256 shards' ranges), `per-shard` (what the listing reads: the shards of the org's
 * repositories, `orgSyncsNewestFirst`) and `page` (per-shard plus what a page reads besides the
 * index: each listed repository's and sync's record). Each listing takes the first 51 entries (a
 * page of 50 and one more). Printed: median and fastest round of wall time per listing, in µs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SHARD_COUNT } from '../src/actors/shard-map.js';
import { openStorage } from '../src/storage/database.js';
import { K, keyInRange, Layout3, Ranges } from '../src/storage/keys.js';
import { firstOf } from '../src/storage/merge-ordered.js';
import { newestFirst, newestFirstAcross } from '../src/storage/newest-first.js';
import { getRepo } from '../src/storage/repo-store.js';
import { getSync, orgSyncsNewestFirst } from '../src/storage/sync-store.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, listings: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 9);
const LISTINGS = Number(values.listings ?? 2000);
const PAGE = 51;

const dir = mkdtempSync(join(tmpdir(), 'repohost-sync-runs-'));
const storage = openStorage(dir);
const { meta } = storage;

let serial = 0;
/** A ULID-like id: sortable by creation (a counter), random-looking enough to spread shards. */
const nextId = (prefix: string): string => `${prefix}_01J${String(serial++).padStart(10, '0')}${Math.random().toString(36).slice(2, 12).toUpperCase()}`;

function populate(orgId: string, repos: number, syncs: number): void {
  storage.root.transactionSync(() => {
    const repoIds = Array.from({ length: repos }, () => nextId('repo'));
    for (const repoId of repoIds) {
      meta.putSync(K.repo(repoId), { id: repoId, org_id: orgId, name: repoId });
      meta.putSync(K.orgRepo(orgId, repoId), true);
    }
    for (let i = 0; i < syncs; i++) {
      for (const repoId of repoIds) {
        const syncId = nextId('sync');
        meta.putSync(K.sync(repoId, syncId), { id: syncId, repo_id: repoId, org_id: orgId, status: 'failed' });
        meta.putSync(K.orgSync(orgId, repoId, syncId), repoId);
        meta.putSync(keyInRange(Layout3.metaRanges([orgId])[0]!, syncId), repoId);
      }
    }
  });
}

for (let i = 0; i < 40; i++) populate(`org_busy${i}`, 20, 25);
const sizes = { small: 'org_small', large: 'org_large', huge: 'org_huge' };
populate(sizes.small, 3, 5);
populate(sizes.large, 200, 10);
populate(sizes.huge, 1000, 2);

const variants: Record<string, (orgId: string) => number> = {
  'one-list': (orgId) => firstOf(newestFirst(meta, Layout3.metaRanges([orgId])[0]!), PAGE).length,
  'all-shards': (orgId) => firstOf(newestFirstAcross(meta, Array.from({ length: SHARD_COUNT }, (_, shard) => Ranges.shardOrgSyncs(shard, orgId))), PAGE).length,
  'per-shard': (orgId) => firstOf(orgSyncsNewestFirst(meta, orgId), PAGE).length,
  page: (orgId) => {
    let n = 0;
    for (const { syncId, repoId } of firstOf(orgSyncsNewestFirst(meta, orgId), PAGE)) if (getRepo(meta, repoId) && getSync(meta, repoId, syncId)) n++;
    return n;
  },
};

const results: Record<string, number[]> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [size, orgId] of Object.entries(sizes)) {
    for (const [name, list] of Object.entries(variants)) {
      const expected = size === 'small' ? 15 : PAGE;
      const started = performance.now();
      for (let i = 0; i < LISTINGS; i++) if (list(orgId) !== expected) throw new Error(`${name} listed the wrong count`);
      (results[`${size} ${name}`] ??= []).push(((performance.now() - started) * 1000) / LISTINGS);
    }
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [name, times] of Object.entries(results)) console.log(`${name.padEnd(20)} median ${median(times).toFixed(1).padStart(7)} µs   fastest ${Math.min(...times).toFixed(1).padStart(7)} µs`);
await storage.close();
rmSync(dir, { recursive: true, force: true });
