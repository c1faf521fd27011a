import { randomBytes } from 'node:crypto';
import { blobOid } from '../read/read-helpers.js';
import { ROOT, bookmarkKey, syncEndKey, type AgentWrite, type BookmarkTrack, type Ledger } from './ledger.js';
import type { Outcome, SoakClient } from './soak-client.js';

/**
 * The soak's mixed load, as a fleet of clients would make it: agents writing with apply-ops (new
 * changes on their bookmark, and evolves of their newest change), a client creating and moving
 * bookmarks, an admin creating repositories and retagging one, readers of content, diffs and
 * lists, and a client enqueueing upstream pulls and pushes. Each role loops until `running()`
 * is false and writes what it was told into the ledger.
 */
export interface Workload {
  client: SoakClient;
  ledger: Ledger;
  org: string;
  /** Repository name → id. */
  repoIds: Map<string, string>;
  running(): boolean;
}

/** Size of the big file some writes carry: over the 1 MiB at which the free-disk check applies. */
export const BIG_BYTES = 1200 * 1024;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const ok = (res: Extract<Outcome, { answered: true }>): boolean => res.status >= 200 && res.status < 300;
const refusalOf = (res: Extract<Outcome, { answered: true }>): string => `${res.status} ${res.json?.error?.code ?? ''}`.trim();

export const latestText = (agent: number, w: number): string => `agent ${agent} write ${w}\n`;
export const writeText = (agent: number, w: number): string => `agent ${agent} wrote w${w}\n`;
export const messageOf = (agent: number, w: number): string => `agent ${agent} write ${w}`;
export const agentDir = (agent: number): string => `agents/${agent}`;
export const writePath = (agent: number, w: number): string => `${agentDir(agent)}/w${w}.txt`;
export const bigPath = (agent: number, w: number): string => `${agentDir(agent)}/big/w${w}.bin`;
export const agentBookmark = (agent: number): string => `agent-${agent}`;

/** Where an agent stands: its newest change (from its bookmark after a lost answer) and that change's commit. */
async function agentHead(w: Workload, repo: string, agent: number): Promise<{ head: string; commit: string | null }> {
  const { client, org } = w;
  for (;;) {
    const bm = await client.answered('GET', `/${org}/${repo}/bookmarks/${agentBookmark(agent)}`);
    if (bm.status === 404) return { head: ROOT, commit: null };
    if (bm.status !== 200) {
      await sleep(100);
      continue;
    }
    const head = bm.json.change_id as string;
    const change = await client.answered('GET', `/${org}/${repo}/changes/${head}`);
    // Without the commit the next write is a create, which needs only the change.
    return { head, commit: change.status === 200 ? (change.json.current_commit_oid as string) : null };
  }
}

/**
 * An agent: on its own bookmark in `repo`, creates a change per write (three in four) or evolves
 * its newest one, each write touching `latest.txt`, a file of its own with metadata, and — for a
 * big agent, every other write — a file over 1 MiB.
 */
export async function agent(w: Workload, repo: string, n: number, opts: { big: boolean; pauseMs: number }): Promise<void> {
  const { client, ledger, org } = w;
  let head = ROOT;
  let commit: string | null = null;
  let lost = false;
  for (let seq = 0; w.running(); seq++) {
    if (lost) {
      ({ head, commit } = await agentHead(w, repo, n));
      lost = false;
    }
    const kind: AgentWrite['kind'] = head !== ROOT && commit !== null && Math.random() < 0.25 ? 'evolve' : 'create';
    const ops: Array<Record<string, unknown>> = [
      { op: 'write', path: `${agentDir(n)}/latest.txt`, content: latestText(n, seq) },
      { op: 'write', path: writePath(n, seq), content: writeText(n, seq) },
      { op: 'set_metadata', path: writePath(n, seq), metadata: { write: String(seq) } },
    ];
    let bigOid: string | null = null;
    if (opts.big && seq % 2 === 0) {
      const bytes = randomBytes(BIG_BYTES);
      bigOid = blobOid(bytes);
      ops.push({ op: 'write', path: bigPath(n, seq), content: bytes.toString('base64'), encoding: 'base64' });
    }
    const body =
      kind === 'create'
        ? { base_change_id: head, message: messageOf(n, seq), ops, bookmarks: [{ name: agentBookmark(n), create: true }] }
        : { change_id: head, expected_commit_oid: commit, ops };
    const record: AgentWrite = {
      agent: n,
      repo,
      w: seq,
      kind,
      fate: 'unknown',
      changeId: kind === 'evolve' ? head : null,
      commitOid: null,
      base: kind === 'create' ? head : null,
      bigOid,
      refusal: null,
      diskRefused: false,
    };
    ledger.writes.push(record);
    const res = await client.call('POST', `/${org}/${repo}/apply-ops`, { body });
    if (!res.answered) {
      lost = true;
    } else if (ok(res)) {
      record.fate = 'acked';
      record.changeId = res.json.change.id;
      record.commitOid = res.json.change.current_commit_oid;
      head = record.changeId!;
      commit = record.commitOid;
      const repoId = w.repoIds.get(repo)!;
      if (kind === 'create') {
        ledger.expect(`change.created ${head}`, ['change.created'], repoId);
        ledger.expect(bookmarkKey(repoId, agentBookmark(n), head), ['bookmark.created', 'bookmark.moved'], repoId);
      } else ledger.expect(`change.evolved ${head} ${commit}`, ['change.evolved'], repoId);
    } else {
      record.fate = 'refused';
      record.refusal = refusalOf(res);
      record.diskRefused = res.status === 503 && /nearly full/.test(res.json?.error?.message ?? '');
      // 503 (a nearly full disk) and 409 (a stale guard after a lost answer) are expected refusals.
      if (res.status === 409) lost = true;
      else if (res.status !== 503 && res.status !== 429) client.anomaly(`agent ${n} ${kind} w${seq}: ${res.status} ${res.text.slice(0, 300)}`);
    }
    await sleep(opts.pauseMs);
  }
}

/**
 * Bookmarks beside the agents': `mark-<n>` follows agent n's newest acknowledged change forward
 * (never backwards, so the move must be accepted as is), and now and then a new `pin-<n>-<k>` is
 * created there.
 */
export async function bookmarker(w: Workload, agents: Array<{ n: number; repo: string }>, pauseMs: number): Promise<void> {
  const { client, ledger, org } = w;
  const marks = new Map<number, BookmarkTrack & { target: string | null }>();
  for (let step = 0; w.running(); step++) {
    await sleep(pauseMs);
    const { n, repo } = agents[step % agents.length]!;
    const latest = ledger.latestCreate(n);
    if (!latest) continue;
    const target = latest.changeId!;
    const repoId = w.repoIds.get(repo)!;
    const base = `/${org}/${repo}/bookmarks`;
    if (step % 9 === 8) {
      const pin: BookmarkTrack = { repo, name: `pin-${n}-${step}`, possible: new Set([target]), exists: 'maybe' };
      ledger.bookmarks.push(pin);
      const res = await client.call('POST', base, { body: { name: pin.name, change_id: target } });
      if (!res.answered) continue;
      if (res.status === 201) {
        pin.exists = 'yes';
        ledger.counts.bookmarkCreates++;
        ledger.expect(bookmarkKey(repoId, pin.name, target), ['bookmark.created'], repoId);
      } else {
        pin.exists = 'no';
        if (res.status !== 503 && res.status !== 429) client.anomaly(`create ${pin.name}: ${res.status} ${res.text.slice(0, 300)}`);
      }
      continue;
    }
    let mark = marks.get(n);
    if (!mark) {
      mark = { repo, name: `mark-${n}`, possible: new Set(), exists: 'no', target: null };
      marks.set(n, mark);
      ledger.bookmarks.push(mark);
    }
    if (mark.target === target) continue;
    if (mark.exists === 'maybe') {
      const got = await client.call('GET', `${base}/${mark.name}`);
      if (!got.answered) continue;
      if (got.status === 404) mark.exists = 'no';
      else if (got.status === 200) {
        if (!mark.possible.has(got.json.change_id)) client.anomaly(`${mark.name} points at ${got.json.change_id}, not one of ${[...mark.possible].join(', ')}`);
        mark.exists = 'yes';
        mark.possible = new Set([got.json.change_id]);
        mark.target = got.json.change_id;
      }
      continue;
    }
    const res =
      mark.exists === 'no'
        ? await client.call('POST', base, { body: { name: mark.name, change_id: target } })
        : await client.call('PATCH', `${base}/${mark.name}`, { body: { change_id: target } });
    if (!res.answered) {
      mark.exists = 'maybe';
      mark.possible.add(target);
      continue;
    }
    if (ok(res)) {
      if (mark.exists === 'yes' && !mark.possible.has(res.json.from_change_id)) client.anomaly(`${mark.name} moved from ${res.json.from_change_id}, not one of ${[...mark.possible].join(', ')}`);
      if (mark.exists === 'no') ledger.counts.bookmarkCreates++;
      else ledger.counts.bookmarkMoves++;
      mark.exists = 'yes';
      mark.possible = new Set([target]);
      mark.target = target;
      ledger.expect(bookmarkKey(repoId, mark.name, target), ['bookmark.created', 'bookmark.moved'], repoId);
    } else if (res.status !== 503 && res.status !== 429) client.anomaly(`${mark.name} to ${target}: ${res.status} ${res.text.slice(0, 300)}`);
  }
}

/** Creates repositories `extra-<k>` and retags `retagged` with `seq: <k>`, in turn. */
export async function admin(w: Workload, retagged: string, pauseMs: number): Promise<void> {
  const { client, ledger, org } = w;
  // '' stands for "not set": until a retag is acknowledged, the unanswered ones may all have failed.
  const tags = new Set<string>(['']);
  ledger.tagValues.set(retagged, tags);
  for (let k = 0; w.running(); k++) {
    await sleep(pauseMs);
    if (k % 2 === 0) {
      const name = `extra-${k}`;
      ledger.createdRepos.set(name, null);
      const res = await client.call('POST', `/${org}/repos`, { body: { name, tags: { soak: 'yes' } } });
      if (!res.answered) continue;
      if (res.status === 201) {
        const id = res.json.id as string;
        ledger.createdRepos.set(name, id);
        ledger.counts.repoCreates++;
        ledger.expect(`repo.created ${id}`, ['repo.created'], id);
        ledger.expect(bookmarkKey(id, 'main', ROOT), ['bookmark.created'], id);
      } else {
        ledger.createdRepos.delete(name);
        if (res.status !== 503 && res.status !== 429) client.anomaly(`create ${name}: ${res.status} ${res.text.slice(0, 300)}`);
      }
    } else {
      const seq = String(k);
      const res = await client.call('PATCH', `/${org}/${retagged}`, { body: { tags: { seq } } });
      if (!res.answered) {
        tags.add(seq);
        continue;
      }
      if (res.status === 200) {
        tags.clear();
        tags.add(seq);
        ledger.counts.repoUpdates++;
        const id = w.repoIds.get(retagged)!;
        ledger.expect(`repo.updated ${id} ${seq}`, ['repo.updated'], id);
      } else if (res.status !== 503 && res.status !== 429) client.anomaly(`retag ${retagged}: ${res.status} ${res.text.slice(0, 300)}`);
    }
  }
}

/**
 * Reads what was acknowledged, while the faults go on: the file of a random acknowledged write
 * (content and metadata must be exact), the diff a create made, an agent's change list and the
 * bookmark list.
 */
export async function reader(w: Workload, pauseMs: number): Promise<void> {
  const { client, ledger, org } = w;
  for (let step = 0; w.running(); step++) {
    await sleep(pauseMs);
    const acked = ledger.ackedWrites();
    if (acked.length === 0) continue;
    const pick = acked[Math.floor(Math.random() * acked.length)]!;
    const base = `/${org}/${pick.repo}`;
    ledger.counts.reads++;
    const wrong = (what: string, res: Extract<Outcome, { answered: true }>): void => client.anomaly(`read ${what} of agent ${pick.agent} w${pick.w}: ${res.status} ${res.text.slice(0, 300)}`);
    switch (step % 4) {
      case 0: {
        const res = await client.call('GET', `${base}/content?change_id=${pick.changeId}&path=${encodeURIComponent(writePath(pick.agent, pick.w))}`);
        if (!res.answered || res.status === 503 || res.status === 429) break;
        const text = res.status === 200 ? Buffer.from(res.json.content, 'base64').toString('utf8') : null;
        if (text !== writeText(pick.agent, pick.w) || res.json.metadata?.write !== String(pick.w)) wrong('content', res);
        break;
      }
      case 1: {
        if (pick.kind !== 'create') break;
        const res = await client.call('GET', `${base}/diff?base_change_id=${pick.base}&head_change_id=${pick.changeId}`);
        if (!res.answered || res.status === 503 || res.status === 429) break;
        const entry = res.status === 200 ? (res.json.entries as Array<{ path: string; status: string }>).find((e) => e.path === writePath(pick.agent, pick.w)) : undefined;
        if (entry?.status !== 'added') wrong('diff', res);
        break;
      }
      case 2: {
        const res = await client.call('GET', `${base}/changes?bookmark=${agentBookmark(pick.agent)}&limit=20`);
        if (res.answered && res.status !== 200 && res.status !== 503 && res.status !== 429) wrong('changes', res);
        break;
      }
      default: {
        const res = await client.call('GET', `${base}/bookmarks?glob=${encodeURIComponent('mark-*')}`);
        if (res.answered && res.status !== 200 && res.status !== 503 && res.status !== 429) wrong('bookmarks', res);
      }
    }
  }
}

/** Enqueues pulls of `pull` and pushes of `push`, in turn. */
export async function syncer(w: Workload, pull: string, push: string, pauseMs: number): Promise<void> {
  const { client, ledger, org } = w;
  for (let k = 0; w.running(); k++) {
    await sleep(pauseMs);
    const repo = k % 2 === 0 ? pull : push;
    const res = k % 2 === 0 ? await client.call('POST', `/${org}/${repo}/upstream/syncs`, { body: { direction: 'pull' } }) : await client.call('POST', `/${org}/${repo}/push`);
    if (!res.answered) {
      ledger.counts.syncsUnknown++;
      continue;
    }
    if (res.status === 201) {
      const id = res.json.id as string;
      ledger.syncs.push({ repo, id });
      const repoId = w.repoIds.get(repo)!;
      ledger.expect(`sync.queued ${id} 0`, ['sync.queued'], repoId);
      ledger.expect(syncEndKey(id), ['sync.completed', 'sync.failed'], repoId);
    } else if (res.status !== 503 && res.status !== 429) client.anomaly(`sync of ${repo}: ${res.status} ${res.text.slice(0, 300)}`);
  }
}
