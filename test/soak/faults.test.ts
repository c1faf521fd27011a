/**
 * The soak with faults: a mixed API load — agents writing with apply-ops to several
 * repositories, bookmark creates and moves, repository creates and updates, reads of content,
 * diffs and lists, upstream pulls and pushes — against a real server process while
 *   - the server is killed with SIGKILL and restarted on the same data directory several times;
 *   - the webhook receivers stall (no answer: the server's 10 s timeout), reset connections,
 *     answer 500, 429 or slowly;
 *   - the upstream git server is slow, resets connections, breaks answers off, answers 503 or
 *     garbage;
 *   - in some of the server's lives the disk's free space is taken below the server's floor
 *     (`REPOHOST_MIN_FREE_BYTES`, set just below the free space of the moment), so large bodies
 *     are refused 503 until the space comes back.
 * Then the faults clear, and the soak checks: every acknowledged write is readable with its
 * content, a write that got no answer is there whole or not at all, a refused one is absent; every
 * event of an acknowledged write reaches each matching target under one delivery id (repeats on
 * the wire under the same id are allowed: API §11.3); every sync ends completed or failed; the
 * repositories export to git that passes `git fsck --strict`; the server's anonymous memory at
 * the end is within a generous bound of what it was after warm-up. The figures go to the TAP
 * output as comments.
 *
 * Length: `REPOHOST_SOAK_S` seconds of faulty load (default 15, four kills), plus the restarts,
 * the settling and the checks: about a minute in all on an idle 2-core machine. A long soak (the file extends its
 * own time limit to fit):
 *   REPOHOST_SOAK_S=1800 npx tap --reporter=tap dist/test/soak/faults.test.js
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import t from 'tap';
import { WEBHOOK_EVENT_KINDS } from '../../src/protocol/schemas/webhooks.js';
import { exportRepo } from '../changes/helpers.js';
import { startGitServer } from '../helpers/git-server.js';
import { startTestServer } from '../helpers/server.js';
import { deliveriesDrained, startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { GIT_PASSWORD, GIT_USER, cleanupWork, makeUpstream, passwordAuth, upstreamCommit } from '../sync/fixtures.js';
import { checkAgentWrites, checkDeliveries, expectedFor, missingEvents, type DeliveryCheck } from './checks.js';
import { DiskFiller } from './disk-filler.js';
import { misbehavingReceiver, misbehavingUpstream, receiverCycle, tallyOf } from './fault-plans.js';
import { Ledger } from './ledger.js';
import { SoakClient, type Outcome } from './soak-client.js';
import { admin, agent, bookmarker, reader, syncer, type Workload } from './workload.js';

const DURATION_S = Number(process.env.REPOHOST_SOAK_S || 15);
const MiB = 1024 * 1024;
/**
 * How long after the load an undelivered event or an unfinished sync may take before it counts
 * as lost: the backlog a long soak leaves behind receivers that hang takes longer to drain.
 */
const SETTLE_MS = Math.max(90_000, DURATION_S * 200);

// Restarts, settling and checks grow with the soak's length.
t.setTimeout(DURATION_S * 1600 + 400_000);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sleepUntil = (at: number): Promise<void> => sleep(Math.max(0, at - Date.now()));
const mib = (bytes: number): string => `${(bytes / MiB).toFixed(0)} MiB`;

/**
 * The server's resident memory: all of it, and its anonymous part (heaps, buffers, native
 * allocations). The rest is mostly the LMDB data file mapped into the process, which grows with
 * the data and is page cache the kernel can take back, so a leak shows in the anonymous part.
 */
interface Memory {
  rss: number;
  anon: number;
}

function memoryOf(pid: number): Memory | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) * 1024;
    const m = { rss: kb('VmRSS'), anon: kb('RssAnon') };
    return Number.isNaN(m.rss) || Number.isNaN(m.anon) ? null : m;
  } catch {
    return null;
  }
}

t.test('soak - through kill -9, faulty receivers and upstream and a nearly full disk, acknowledged writes stay whole and their events arrive once', async (t) => {
  // Small retry bases, so that retries end within the soak.
  const env: Record<string, string> = { REPOHOST_WEBHOOK_RETRY_BASE_MS: '20', REPOHOST_SYNC_RETRY_BASE_MS: '100' };
  const git = await startGitServer({ users: { [GIT_USER]: GIT_PASSWORD } });
  const rx = await startWebhookReceiver();
  const s = await startTestServer({ env, workers: 2 });
  const filler = new DiskFiller(dirname(s.dataDir));
  t.teardown(async () => {
    filler.remove();
    s.cleanup();
    await rx.close();
    await git.close();
  });
  const client = new SoakClient(s);
  const ledger = new Ledger();
  const org = s.org;

  // Repositories: three for agents, one pushing to an upstream, one pulling from another.
  const up = await makeUpstream(git, 'up-pull');
  t.teardown(() => cleanupWork(up));
  const pushUrl = await git.createRepo('up-push');
  const repoIds = new Map<string, string>();
  const repos = { 'soak-a': null, 'soak-b': null, 'soak-c': null, 'soak-push': { url: pushUrl, auth: passwordAuth }, 'soak-pull': { url: up.url, auth: passwordAuth } };
  for (const [name, upstream] of Object.entries(repos)) {
    const res = await s.api('POST', `/${org}/repos`, { body: { name, upstream } });
    t.equal(res.status, 201, `create ${name}`);
    repoIds.set(name, res.json.id);
  }
  const agents = [
    { n: 0, repo: 'soak-a', big: false },
    { n: 1, repo: 'soak-a', big: false },
    { n: 2, repo: 'soak-b', big: false },
    { n: 3, repo: 'soak-c', big: true },
    { n: 4, repo: 'soak-push', big: false },
  ];

  // The load runs, and the faults happen, until `running` turns false.
  let running = true;
  const loadRunning = (): boolean => running;
  const receiverFaults = new Map<string, number>();
  const targets = [
    { path: '/all', events: [...WEBHOOK_EVENT_KINDS] as string[], repoIds: null as string[] | null, cycle: receiverCycle('reset', 'error', 'slow', 'busy', 'error', 'hang', 'reset'), id: '' },
    {
      path: '/repos',
      events: ['change.created', 'change.evolved', 'bookmark.created', 'bookmark.moved'],
      repoIds: [repoIds.get('soak-a')!, repoIds.get('soak-c')!],
      cycle: receiverCycle('error', 'reset', 'error', 'slow', 'reset', 'busy', 'error'),
      id: '',
    },
    { path: '/syncs', events: ['sync.queued', 'sync.in_progress', 'sync.completed', 'sync.failed', 'push'], repoIds: null, cycle: receiverCycle('hang', 'reset', 'slow', 'error'), id: '' },
  ];
  for (const target of targets) {
    const res = await s.api('POST', `/${org}/webhook-targets`, { body: { url: rx.url(target.path), events: target.events, repo_ids: target.repoIds } });
    t.equal(res.status, 201, `target ${target.path}`);
    target.id = res.json.id;
    rx.setSecret(target.path, res.json.secret);
    rx.behave(target.path, misbehavingReceiver(loadRunning, target.cycle, receiverFaults));
  }
  const upstreamFaults = new Map<string, number>();
  git.misbehave(misbehavingUpstream(loadRunning, upstreamFaults));

  const w: Workload = { client, ledger, org, repoIds, running: loadRunning };
  const roles = [
    ...agents.map((a) => agent(w, a.repo, a.n, { big: a.big, pauseMs: a.big ? 250 : 120 })),
    bookmarker(w, agents, 150),
    admin(w, 'soak-b', 700),
    reader(w, 40),
    reader(w, 40),
    syncer(w, 'soak-pull', 'soak-push', 900),
    (async () => {
      for (let k = 0; running; k++) {
        await sleep(2500);
        await upstreamCommit(git, up, 'main', 'soak.txt', `tick ${k}\n`, { n: 100 + k });
      }
    })(),
  ];

  // The server's lives: `kills` short ones, each killed a fixed time after its start (restarts
  // take what they take on a busy machine), then a last one of half the soak, long enough to show
  // whether memory stays flat. Every third life sees a nearly full disk.
  const started = Date.now();
  const since = (ms: number): string => `+${((ms - started) / 1000).toFixed(1)} s`;
  const kills = Math.max(4, Math.round(DURATION_S / 30));
  const lifeMs = (l: number): number => (l < kills ? (500 * DURATION_S) / kills : 500 * DURATION_S);
  const diskLife = (l: number): boolean => l % 3 === 1 && l < kills;
  let life = 0;
  const memory: Array<Memory & { life: number; at: number }> = [];
  const sampler = setInterval(() => {
    const m = memoryOf(s.process.pid!);
    if (m !== null) memory.push({ ...m, life, at: Date.now() });
  }, 1000);
  t.teardown(() => clearInterval(sampler));
  const uploadBig = (): ReturnType<SoakClient['call']> => client.call('POST', `/${org}/soak-c/blobs`, { raw: randomBytes(2 * MiB), headers: { 'content-type': 'application/octet-stream' } });
  const killedAt: string[] = [];
  const restartMs: number[] = [];
  const diskWindows: string[] = [];
  let lifeStarted = started;
  for (;;) {
    const end = lifeStarted + lifeMs(life);
    if (diskLife(life)) {
      const floor = Number(env.REPOHOST_MIN_FREE_BYTES);
      const from = Date.now();
      let full: Outcome;
      let free: number;
      for (let tries = 1; ; tries++) {
        filler.fillUnder(floor, 128 * MiB, 4096 * MiB);
        free = filler.free();
        full = await uploadBig();
        // Other programs share the disk: when space they freed meanwhile let the upload in, the
        // free space is taken again. An upload stored below the floor is a failure at once.
        if (!full.answered || full.status !== 201 || filler.free() < floor || tries === 5) break;
      }
      t.ok(free < floor, `life ${life}: the free space is under the floor (${mib(free)} free, floor ${mib(floor)}, ${mib(filler.size)} taken)`);
      t.match(full, { status: 503, json: { error: { code: 'UNAVAILABLE', message: /nearly full/ } } }, `life ${life}: a large upload is refused while the disk is nearly full`);
      await sleepUntil(Math.max(end - (end - Date.now()) / 4, Date.now() + 3000));
      filler.remove();
      diskWindows.push(`${since(from)}…${since(Date.now())}`);
      const room = await uploadBig();
      t.equal(room.answered && room.status, 201, `life ${life}: once the space is back, a large upload is stored`);
    }
    await sleepUntil(end);
    if (life === kills) break;
    client.down();
    killedAt.push(since(Date.now()));
    await s.kill();
    life++;
    // The floor is read at start-up: a disk life starts with it just below the free space.
    if (diskLife(life)) env.REPOHOST_MIN_FREE_BYTES = String(filler.floorBelowFree(512 * MiB));
    else delete env.REPOHOST_MIN_FREE_BYTES;
    const restarting = Date.now();
    await s.restart();
    restartMs.push(Date.now() - restarting);
    lifeStarted = Date.now();
    client.up();
  }

  // The faults clear; the load stops.
  running = false;
  await Promise.all(roles);
  const loadEnded = Date.now();
  const warm = memory.find((m) => m.life === kills && m.at >= lifeStarted + lifeMs(kills) / 2);
  const settleBy = loadEnded + SETTLE_MS;

  // Every sync ends, completed or failed.
  const syncStatuses = async (): Promise<Map<string, string>> => {
    const all = new Map<string, string>();
    for (let cursor = ''; ; ) {
      const page = await client.answered('GET', `/${org}/sync-runs?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      if (page.status !== 200) throw new Error(`sync-runs: ${page.status} ${page.text}`);
      for (const run of page.json.sync_runs) all.set(run.id, run.status);
      if (!page.json.has_more) return all;
      cursor = page.json.next_cursor;
    }
  };
  let syncs = await syncStatuses();
  while ([...syncs.values()].some((st) => st === 'queued' || st === 'in_progress') && Date.now() < settleBy) {
    await sleep(250);
    syncs = await syncStatuses();
  }
  const syncsSettled = Date.now();
  t.same([...syncs].filter(([, st]) => st !== 'completed' && st !== 'failed'), [], `every sync ended (${syncs.size} syncs)`);
  t.same(ledger.syncs.filter(({ id }) => !syncs.has(id)), [], `every acknowledged sync is listed (${ledger.syncs.length})`);

  // Every acknowledged write is readable; an unanswered one is whole or absent; a refused one is absent.
  let appliedUnanswered = 0;
  for (const { n, repo } of agents) {
    const checked = await checkAgentWrites(s, client, ledger, repoIds.get(repo)!, n, repo);
    appliedUnanswered += checked.appliedUnanswered;
    const count = (fate: string): number => ledger.agentWrites(n).filter((wr) => wr.fate === fate).length;
    t.same(checked.problems, [], `agent ${n}: ${count('acked')} acknowledged writes readable, ${count('unknown')} unanswered whole or absent, ${count('refused')} refused absent`);
  }

  // Every event of an acknowledged write reaches each matching target, under one delivery id.
  const expected = targets.map((target) => expectedFor(target, ledger.expected));
  while (Date.now() < settleBy) {
    const arrived = targets.every((target, i) => missingEvents(rx, target.path, expected[i]!).length === 0);
    if (arrived && deliveriesDrained(s.dataDir, targets.map((target) => target.id))) break;
    await sleep(250);
  }
  const delivered = Date.now();
  const checks: DeliveryCheck[] = targets.map((target, i) => checkDeliveries(rx, target, expected[i]!));
  targets.forEach(({ path }, i) => {
    const c = checks[i]!;
    t.equal(c.unsigned, 0, `${path}: every delivery is signed`);
    t.same(c.missing, [], `${path}: every event of an acknowledged write arrived (${expected[i]!.length} expected)`);
    t.same(c.twice, [], `${path}: no acknowledged write's event was emitted twice`);
    t.same(c.underSeveralIds, [], `${path}: each event came under one delivery id`);
    t.same(c.neverAcknowledged, [], `${path}: every delivery was finally answered 2xx`);
    t.same(c.strays, [], `${path}: nothing outside the target's kinds and repositories`);
  });

  // Bookmarks, repositories and tags where the acknowledged answers left them.
  const bookmarkProblems: string[] = [];
  for (const b of ledger.bookmarks) {
    const res = await client.answered('GET', `/${org}/${b.repo}/bookmarks/${b.name}`);
    if (res.status === 404 && b.exists !== 'yes') continue;
    if (res.status !== 200 || b.exists === 'no' || !b.possible.has(res.json.change_id)) {
      bookmarkProblems.push(`${b.name} (${b.exists}, one of ${[...b.possible].join(' ')}): ${res.status} ${res.json?.change_id ?? res.text.slice(0, 100)}`);
    }
  }
  t.same(bookmarkProblems, [], `${ledger.bookmarks.length} bookmarks where their acknowledged creates and moves left them`);
  const repoProblems: string[] = [];
  for (const [name, id] of ledger.createdRepos) {
    const res = await client.answered('GET', `/${org}/${name}`);
    const right = id === null ? res.status === 200 || res.status === 404 : res.status === 200 && res.json.id === id && res.json.tags.soak === 'yes';
    if (!right) repoProblems.push(`${name}: ${res.status} ${res.text.slice(0, 100)}`);
  }
  for (const [name, values] of ledger.tagValues) {
    const res = await client.answered('GET', `/${org}/${name}`);
    if (!values.has(res.json.tags.seq ?? '')) repoProblems.push(`${name} tag seq ${res.json.tags.seq}, expected one of ${[...values].join(' ')}`);
  }
  t.same(repoProblems, [], `${ledger.createdRepos.size} created repositories there, tags as acknowledged`);

  // The stored objects are whole: each repository exports to git that passes fsck --strict.
  for (const name of Object.keys(repos)) {
    const x = exportRepo({ s, repo: name, base: `/${org}/${name}` });
    t.equal(x.fsckProblems(), null, `${name}: export passes git fsck --strict`);
    x.cleanup();
  }

  t.same(client.anomalies, [], 'no 5xx but 503, and every read of acknowledged data was right');
  t.same(client.timedOut.map((x) => `${x.what} sent at ${since(x.sentAt)}`), [], 'every request was answered or cut by a kill');

  // The faults did happen.
  const wire = { received: 0, unique: 0, repeatsAfter2xx: 0 };
  for (const c of checks) {
    wire.received += c.received;
    wire.unique += c.unique;
    wire.repeatsAfter2xx += c.repeatsAfter2xx;
  }
  t.equal(restartMs.length, kills, `${kills} kills`);
  t.ok(wire.received > wire.unique, `the receivers misbehaved (${tallyOf(receiverFaults)}) and deliveries were retried`);
  t.ok(upstreamFaults.size > 0, `the upstream misbehaved (${tallyOf(upstreamFaults)})`);

  // Memory stays flat: the last life's at the end, against the same life's after warm-up.
  const end = memoryOf(s.process.pid!)!;
  t.ok(warm, 'a memory sample after warm-up');
  const bound = warm!.anon * 1.5 + 128 * MiB;
  t.ok(end.anon <= bound, `anonymous memory at the end ${mib(end.anon)} within ${mib(bound)} (after warm-up ${mib(warm!.anon)})`);

  const writes = (fate: string): number => ledger.writes.filter((wr) => wr.fate === fate).length;
  const ended = (status: string): number => [...syncs.values()].filter((st) => st === status).length;
  const lastLife = memory.filter((m) => m.life === kills);
  const sixths = (pick: (m: Memory) => number): string =>
    Array.from({ length: 7 }, (_, i) => lastLife[Math.round((i * (lastLife.length - 1)) / 6)]!).map((m) => mib(pick(m))).join(' → ');
  const firstLife = memory.filter((m) => m.life === 0);
  t.comment(`soak: ${DURATION_S} s of faulty load; ${kills} kills at ${killedAt.join(', ')} (restarts took ${restartMs.join('/')} ms); load ended ${since(loadEnded)}`);
  t.comment(
    `writes: ${ledger.writes.length} apply-ops (${writes('acked')} acknowledged; ${writes('unknown')} unanswered, of which ${appliedUnanswered} creates applied; ` +
      `${writes('refused')} refused, ${ledger.writes.filter((wr) => wr.diskRefused).length} for a nearly full disk); bookmarks ${ledger.counts.bookmarkCreates} created, ` +
      `${ledger.counts.bookmarkMoves} moved; repositories ${ledger.counts.repoCreates} created, ${ledger.counts.repoUpdates} updated; ${ledger.counts.reads} reads during the load`,
  );
  t.comment(`answers: ${client.tally()}; ${client.lost} requests cut by kills`);
  t.comment(`disk: nearly full at ${diskWindows.join(', ')}`);
  t.comment(`syncs: ${syncs.size} (${ended('completed')} completed, ${ended('failed')} failed; ${ledger.counts.syncsUnknown} enqueues unanswered), all ended ${since(syncsSettled)}; upstream requests ${git.requests.length}, faults ${tallyOf(upstreamFaults)}`);
  t.comment(
    `webhooks: ${ledger.expected.length} expected events over ${targets.length} targets; ${wire.unique} deliveries, ${wire.received} requests on the wire, ` +
      `${wire.received - wire.unique} repeats (${wire.repeatsAfter2xx} after a 2xx); all delivered ${since(delivered)}; receiver faults ${tallyOf(receiverFaults)}`,
  );
  t.comment(`memory of the first life: RSS ${mib(firstLife[0]!.rss)} → ${mib(firstLife.at(-1)!.rss)}, anonymous ${mib(firstLife[0]!.anon)} → ${mib(firstLife.at(-1)!.anon)}`);
  t.comment(`memory of the last life, in sixths: RSS ${sixths((m) => m.rss)}; anonymous ${sixths((m) => m.anon)}`);
  t.comment(`memory at the end: RSS ${mib(end.rss)}, anonymous ${mib(end.anon)}; after warm-up RSS ${mib(warm!.rss)}, anonymous ${mib(warm!.anon)}; peak RSS ${mib(Math.max(...memory.map((m) => m.rss)))}`);

  // What the server logged above info, by message (stderr output counted apart).
  const logged = new Map<string, number>();
  for (const line of s.logs) {
    let rec: { level?: string; msg?: string } | null = null;
    try {
      rec = JSON.parse(line) as { level?: string; msg?: string };
    } catch {
      logged.set('(stderr)', (logged.get('(stderr)') ?? 0) + 1);
    }
    if (rec && (rec.level === 'warn' || rec.level === 'error')) logged.set(`${rec.level}: ${rec.msg}`, (logged.get(`${rec.level}: ${rec.msg}`) ?? 0) + 1);
  }
  t.comment(`server log above info: ${[...logged].map(([msg, n]) => `${msg} ×${n}`).join('; ') || 'nothing'}`);

  let stopTimer: NodeJS.Timeout | undefined;
  const stopped = await Promise.race([s.stop(), new Promise((r) => (stopTimer = setTimeout(() => r('no exit within 30 s'), 30_000)))]);
  clearTimeout(stopTimer);
  t.equal(stopped, 0, `SIGTERM stops the server cleanly${stopped === 0 ? '' : `; log tail:\n${s.logs.slice(-20).join('\n')}`}`);
});
