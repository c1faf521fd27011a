import type { TestServer } from '../helpers/server.js';
import type { ReceivedDelivery, WebhookReceiver } from '../helpers/webhook-receiver.js';
import { ROOT, bookmarkKey, eventKey, type ExpectedEvent, type Ledger } from './ledger.js';
import type { SoakClient } from './soak-client.js';
import { blobOid } from '../read/read-helpers.js';
import { agentBookmark, agentDir, bigPath, latestText, messageOf, writePath, writeText } from './workload.js';

/**
 * What the soak checks once the faults have cleared, as lists of problems (empty when all holds).
 */

/**
 * An agent's writes against what its repository holds. The agent's writes form one line of
 * history under its bookmark, and each leaves a file of its own, so the files under the
 * bookmark's change are the writes that were applied. An acknowledged write must be there, read
 * back exactly at its own change; a refused one must not; an unanswered one is either there
 * whole (its file and metadata, its big file, its change with its message, `latest.txt` when it
 * was the last) or not at all. An unanswered create found applied must have its events too:
 * they are added to the ledger's expectations.
 */
export async function checkAgentWrites(s: TestServer, client: SoakClient, ledger: Ledger, repoId: string, n: number, repo: string): Promise<{ problems: string[]; appliedUnanswered: number }> {
  const base = `/${s.org}/${repo}`;
  const mine = ledger.agentWrites(n);
  const problems: string[] = [];
  let appliedUnanswered = 0;
  const bm = await client.answered('GET', `${base}/bookmarks/${agentBookmark(n)}`);
  const head = bm.status === 200 ? (bm.json.change_id as string) : ROOT;
  const files = new Map<string, { metadata?: Record<string, string>; sha: string }>();
  const messages = new Map<string, string>();
  if (head !== ROOT) {
    const listing = await client.answered('GET', `${base}/content?change_id=${head}&path=${encodeURIComponent(agentDir(n))}&depth=2`);
    if (listing.status !== 200) problems.push(`its directory: ${listing.status} ${listing.text.slice(0, 200)}`);
    for (const e of listing.json.entries ?? []) files.set(e.path, e);
    for (let cursor = ''; ; ) {
      const page = await client.answered('GET', `${base}/changes?bookmark=${agentBookmark(n)}&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      for (const c of page.json.changes ?? []) messages.set(c.message, c.id);
      if (!page.json.has_more) break;
      cursor = page.json.next_cursor;
    }
  }

  let lastApplied = -1;
  for (const wr of mine) {
    const file = files.get(writePath(n, wr.w));
    const applied = file !== undefined;
    if (applied) lastApplied = Math.max(lastApplied, wr.w);
    if (wr.fate === 'acked' && !applied) problems.push(`acknowledged w${wr.w} is missing`);
    if (wr.fate === 'refused' && applied) problems.push(`refused w${wr.w} (${wr.refusal}) is there`);
    if (applied && file.metadata?.write !== String(wr.w)) problems.push(`w${wr.w}: metadata ${JSON.stringify(file.metadata)}`);
    const big = files.get(bigPath(n, wr.w));
    if (applied && wr.bigOid !== null && big?.sha !== wr.bigOid) problems.push(`w${wr.w}: big file ${big?.sha ?? 'missing'}, expected ${wr.bigOid}`);
    if (!applied && big) problems.push(`w${wr.w}: big file without the rest of its write`);
    if (wr.kind !== 'create') continue;
    const change = messages.get(messageOf(n, wr.w));
    if (applied !== (change !== undefined)) problems.push(`create w${wr.w}: files ${applied ? 'there' : 'absent'} but its change ${change ? 'there' : 'absent'}`);
    if (wr.fate === 'acked' && change !== wr.changeId) problems.push(`create w${wr.w}: change ${change}, acknowledged ${wr.changeId}`);
    if (wr.fate === 'unknown' && change !== undefined) {
      ledger.expect(`change.created ${change}`, ['change.created'], repoId);
      ledger.expect(bookmarkKey(repoId, agentBookmark(n), change), ['bookmark.created', 'bookmark.moved'], repoId);
      appliedUnanswered++;
    }
  }
  if (lastApplied >= 0) {
    const latest = await client.answered('GET', `${base}/content?change_id=${head}&path=${encodeURIComponent(`${agentDir(n)}/latest.txt`)}`);
    const text = latest.status === 200 ? Buffer.from(latest.json.content, 'base64').toString('utf8') : `${latest.status}`;
    if (text !== latestText(n, lastApplied)) problems.push(`latest.txt is ${JSON.stringify(text)} after w${lastApplied}`);
  }

  // Each acknowledged write read back at its own change: content, metadata, the big file's bytes.
  const acked = mine.filter((wr) => wr.fate === 'acked');
  for (let i = 0; i < acked.length; i += 8) {
    await Promise.all(
      acked.slice(i, i + 8).map(async (wr) => {
        const res = await client.answered('GET', `${base}/content?change_id=${wr.changeId}&path=${encodeURIComponent(writePath(n, wr.w))}`);
        const text = res.status === 200 ? Buffer.from(res.json.content, 'base64').toString('utf8') : `${res.status}`;
        if (text !== writeText(n, wr.w) || res.json.metadata?.write !== String(wr.w)) problems.push(`w${wr.w} at ${wr.changeId}: ${text.slice(0, 100)}`);
        if (wr.bigOid === null) return;
        const raw = await fetch(`${s.url}/v1${base}/content?change_id=${wr.changeId}&path=${encodeURIComponent(bigPath(n, wr.w))}`, {
          headers: { authorization: `Bearer ${await s.token()}`, accept: 'application/octet-stream' },
        });
        const bytes = Buffer.from(await raw.arrayBuffer());
        const hash = raw.headers.get('x-svc-blob-hash');
        if (raw.status !== 200 || hash !== wr.bigOid || blobOid(bytes) !== wr.bigOid) problems.push(`big w${wr.w}: ${raw.status}, hash ${hash}, ${bytes.length} bytes`);
      }),
    );
  }
  return { problems, appliedUnanswered };
}

export interface SoakTarget {
  path: string;
  events: string[];
  repoIds: string[] | null;
}

/** The expected events a target subscribes to. */
export function expectedFor(target: SoakTarget, expected: ExpectedEvent[]): ExpectedEvent[] {
  return expected.filter((e) => e.types.some((type) => target.events.includes(type)) && (target.repoIds === null || (e.repoId !== null && target.repoIds.includes(e.repoId))));
}

/** Event key → the distinct event ids delivered under it to `path`. */
function deliveredKeys(rx: WebhookReceiver, path: string): Map<string, Set<string>> {
  const keys = new Map<string, Set<string>>();
  for (const d of rx.unique(path)) {
    const key = eventKey(d.body);
    if (key === null) continue;
    let ids = keys.get(key);
    if (!ids) keys.set(key, (ids = new Set()));
    ids.add(d.body.id);
  }
  return keys;
}

export function missingEvents(rx: WebhookReceiver, path: string, expected: ExpectedEvent[]): string[] {
  const keys = deliveredKeys(rx, path);
  return expected.filter((e) => !keys.has(e.key)).map((e) => e.key);
}

export interface DeliveryCheck {
  unsigned: number;
  /** Events that came under more than one delivery id. */
  underSeveralIds: string[];
  /** Deliveries the receiver never answered with a 2xx. */
  neverAcknowledged: string[];
  missing: string[];
  /** Expected events emitted more than once (two event ids for one write). */
  twice: string[];
  /** Events outside the target's kinds or repositories. */
  strays: string[];
  received: number;
  unique: number;
  /** Arrivals of a delivery the receiver had already answered 2xx (a crash between answer and record). */
  repeatsAfter2xx: number;
}

/** Every delivery a target's receiver saw, against what the target should have been sent. */
export function checkDeliveries(rx: WebhookReceiver, target: SoakTarget, expected: ExpectedEvent[]): DeliveryCheck {
  const all = rx.received(target.path);
  const received = all.filter((d) => d.verified);
  const unique = rx.unique(target.path);
  const byDelivery = new Map<string, ReceivedDelivery[]>();
  for (const d of received) {
    const id = d.headers['x-svc-delivery'] as string;
    byDelivery.set(id, [...(byDelivery.get(id) ?? []), d]);
  }
  const deliveriesOfEvent = new Map<string, Set<string>>();
  const neverAcknowledged: string[] = [];
  let repeatsAfter2xx = 0;
  for (const [id, arrivals] of byDelivery) {
    for (const d of arrivals) deliveriesOfEvent.set(d.body.id, new Set([...(deliveriesOfEvent.get(d.body.id) ?? []), id]));
    const firstOk = arrivals.findIndex((d) => d.answered >= 200 && d.answered < 300);
    if (firstOk < 0) neverAcknowledged.push(`${id} (${arrivals[0]!.body.type})`);
    else repeatsAfter2xx += arrivals.length - firstOk - 1;
  }
  const keys = deliveredKeys(rx, target.path);
  return {
    unsigned: all.length - received.length,
    underSeveralIds: [...deliveriesOfEvent].filter(([, ids]) => ids.size > 1).map(([e, ids]) => `${e}: ${[...ids].join(', ')}`),
    neverAcknowledged,
    missing: expected.filter((e) => !keys.has(e.key)).map((e) => e.key),
    twice: expected.filter((e) => (keys.get(e.key)?.size ?? 0) > 1).map((e) => e.key),
    strays: unique
      .filter((d) => !target.events.includes(d.body.type) || (target.repoIds !== null && !target.repoIds.includes(d.body.repository?.id)))
      .map((d) => `${d.body.type} ${d.body.repository?.name}`),
    received: received.length,
    unique: unique.length,
    repeatsAfter2xx,
  };
}
