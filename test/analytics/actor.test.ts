import t from 'tap';
import { AnalyticsActor } from '../../src/actors/system/analytics/actor.js';
import { AgentTable } from '../../src/actors/system/analytics/agent-table.js';
import { AnalyticsEngine } from '../../src/actors/system/analytics/engine.js';
import type { RunOutcome } from '../../src/actors/system/analytics/engine.js';
import { LmdbAnalyticsSource } from '../../src/actors/system/analytics/source.js';
import type { AnalyticsSource } from '../../src/actors/system/analytics/source.js';
import { readAnalytics } from '../../src/actors/system/analytics/status.js';
import type { AnalyticsDocument } from '../../src/actors/system/analytics/document.js';
import { K } from '../../src/storage/keys.js';
import { getRepo } from '../../src/storage/repo-store.js';
import type { Storage } from '../../src/storage/database.js';
import type { ObjectStore } from '../../src/vcs/object-store.js';
import { TestHistory, lines, seedRepo, tempStorage } from './fixtures.js';

const REPO = 'repo_actor';

/** Heads from LMDB (as the write path leaves them), objects from the test history; can be made to fail. */
class SwitchableSource implements AnalyticsSource {
  failure: string | null = null;
  readonly #lmdb: LmdbAnalyticsSource;
  constructor(storage: Storage, private readonly history: TestHistory) {
    this.#lmdb = new LmdbAnalyticsSource(storage);
  }
  exists(repoId: string): boolean {
    return this.#lmdb.exists(repoId);
  }
  head(repoId: string): string | null {
    return this.#lmdb.head(repoId);
  }
  notes(repoId: string): string | null {
    return this.#lmdb.notes(repoId);
  }
  objects(): ObjectStore {
    if (this.failure) throw new Error(this.failure);
    return this.history.store;
  }
  predecessor(repoId: string, oid: string): string | null {
    return this.#lmdb.predecessor(repoId, oid);
  }
}

const status = (storage: Storage) => {
  const { text, status } = readAnalytics(storage.meta, getRepo(storage.meta, REPO)!);
  return { analytics: text === null ? null : (JSON.parse(text) as AnalyticsDocument), status };
};

t.test('actor - status goes none, current, stale with the error after a failed run, and current again on retry', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  const history = new TestHistory();
  const source = new SwitchableSource(storage, history);
  const outcomes: RunOutcome['kind'][] = [];
  const actor = new AnalyticsActor(storage, new AnalyticsEngine(storage, source, AgentTable.defaults()), {
    retryBaseMs: 50,
    onOutcome: (_, o) => outcomes.push(o.kind),
  });

  seedRepo(storage, REPO, null);
  t.equal(actor.scan(), 0, 'an empty repository is not computed');
  t.same(status(storage), { analytics: null, status: 'none' });

  const c1 = history.commit({ files: { 'a.txt': lines('a', 'b') } });
  seedRepo(storage, REPO, c1);
  t.equal(actor.scan(), 1);
  await actor.idle();
  let s = status(storage);
  t.equal(s.status, 'current');
  t.equal(s.analytics!.summary.totalLines, 2);

  const c2 = history.commit({ files: { 'a.txt': lines('a', 'b', 'c') }, parents: [c1] });
  seedRepo(storage, REPO, c2);
  t.equal(status(storage).status, 'stale', 'behind the head before the actor ran');
  source.failure = 'object store unavailable';
  actor.scan();
  await actor.idle();
  s = status(storage);
  t.equal(s.status, 'stale');
  t.equal(s.analytics!._meta.lastError, 'object store unavailable');
  t.equal(s.analytics!.summary.totalLines, 2, 'the last good counts are still served');
  t.equal(actor.scan(), 0, 'no retry before the backoff is over');

  source.failure = null;
  t.equal(actor.scan(Date.now() + 60), 1, 'retried once the backoff is over');
  await actor.idle();
  s = status(storage);
  t.equal(s.status, 'current');
  t.equal(s.analytics!._meta.lastError, '');
  t.equal(s.analytics!.summary.totalLines, 3);
  t.same(outcomes, ['rebuild', 'failed', 'incremental']);
  await actor.stop();
});

t.test('actor - moves during a run coalesce into one more run at the latest head', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  const history = new TestHistory();
  const engine = new AnalyticsEngine(storage, new SwitchableSource(storage, history), AgentTable.defaults());
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const runs: Array<string | null> = [];
  const actor = new AnalyticsActor(storage, {
    needsRun: (id) => engine.needsRun(id),
    async run(id) {
      const outcome = await engine.run(id);
      runs.push(outcome.head);
      await gate;
      return outcome;
    },
  });
  const first = history.commit({ files: { 'f.txt': lines('0') } });
  let head = first;
  seedRepo(storage, REPO, head);
  actor.scan();
  for (let i = 1; i <= 5; i++) {
    head = history.commit({ files: { 'f.txt': lines(...Array.from({ length: i + 1 }, (_, j) => String(j))) }, parents: [head] });
    seedRepo(storage, REPO, head);
    t.equal(actor.scan(), 0, 'not queued again while queued or running');
  }
  release();
  await actor.idle();
  t.same(runs, [first, head], 'six positions of the bookmark, two runs: the first head and the latest');
  t.equal(status(storage).status, 'current');
  t.equal(status(storage).analytics!.summary.totalLines, 6);
  await actor.stop();
});

t.test('actor - a deleted repository is forgotten', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  const history = new TestHistory();
  const engine = new AnalyticsEngine(storage, new SwitchableSource(storage, history), AgentTable.defaults());
  const actor = new AnalyticsActor(storage, engine);
  seedRepo(storage, REPO, history.commit({ files: { 'a.txt': lines('a') } }));
  storage.meta.removeSync(K.repo(REPO));
  t.equal(actor.scan(), 0);
  t.notOk(engine.needsRun(REPO));
  await actor.stop();
});

t.test('actor - a turn looks at the touched repositories and due retries; every record only at the full scan', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  const history = new TestHistory();
  const source = new SwitchableSource(storage, history);
  const actor = new AnalyticsActor(storage, new AnalyticsEngine(storage, source, AgentTable.defaults()), { fullScanMs: 60_000, retryBaseMs: 5_000 });
  const now = Date.now();
  seedRepo(storage, REPO, null);
  t.equal(actor.turn(now), 0, 'the first turn scans every record: nothing to compute yet');

  const c1 = history.commit({ files: { 'a.txt': lines('a') } });
  seedRepo(storage, REPO, c1);
  t.equal(actor.turn(now + 500), 0, 'a change no call announced waits for the next full scan');
  actor.touched([REPO]);
  t.equal(actor.turn(now + 1000), 1, 'announced: queued at the next turn');
  await actor.idle();
  t.equal(status(storage).status, 'current');

  const c2 = history.commit({ files: { 'a.txt': lines('a', 'b') }, parents: [c1] });
  seedRepo(storage, REPO, c2);
  source.failure = 'object store unavailable';
  actor.touched([REPO]);
  actor.turn(now + 1500);
  await actor.idle();
  t.equal(status(storage).status, 'stale');
  source.failure = null;
  t.equal(actor.turn(Date.now()), 0, 'no retry before the backoff is over');
  t.equal(actor.turn(Date.now() + 6_000), 1, 'a due retry is looked at without being touched');
  await actor.idle();
  t.equal(status(storage).status, 'current');

  const c3 = history.commit({ files: { 'a.txt': lines('a', 'b', 'c') }, parents: [c2] });
  seedRepo(storage, REPO, c3);
  t.equal(actor.turn(Date.now() + 1_000), 0, 'untouched before the full scan is due');
  t.equal(actor.turn(Date.now() + 61_000), 1, 'the full scan finds it');
  await actor.idle();
  t.equal(status(storage).analytics!.summary.totalLines, 3);
});

t.test('actor - only the owner of the shard computes (cluster mode); a shard taken over is computed at the next full scan', async (t) => {
  const { storage, cleanup } = tempStorage();
  t.teardown(cleanup);
  const history = new TestHistory();
  let owned = false;
  const outcomes: string[] = [];
  const actor = new AnalyticsActor(storage, new AnalyticsEngine(storage, new SwitchableSource(storage, history), AgentTable.defaults()), {
    fullScanMs: 60_000,
    serves: () => owned,
    onOutcome: (_, o) => outcomes.push(o.kind),
  });
  seedRepo(storage, REPO, history.commit({ files: { 'a.txt': lines('a') } }));
  const now = Date.now();
  t.equal(actor.turn(now), 0, 'a follower does not compute');
  actor.touched([REPO]);
  t.equal(actor.turn(now + 500), 0, 'not even when told of a call');
  await actor.idle();
  t.same(outcomes, []);
  t.not(status(storage).status, 'current');
  owned = true;
  t.equal(actor.turn(now + 61_000), 1, 'owned now: the next full scan computes it');
  await actor.idle();
  t.same(outcomes, ['rebuild']);
  t.equal(status(storage).status, 'current');
});
