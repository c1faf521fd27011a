import t from 'tap';
import type { EventEnvelope, OperationRecord } from '../../src/storage/records.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { ROOT, createRepo, operations, repoId, write } from './history.js';

/**
 * Bookmark writes announce themselves (API §11.2) — observed as a customer would, through a
 * webhook target — and leave one operation each in the repository's log.
 */

let s: TestServer;
let rx: WebhookReceiver;
const PATH = '/bookmarks';
const KINDS = ['bookmark.created', 'bookmark.moved', 'bookmark.deleted', 'bookmark.merged', 'change.created'];

t.before(async () => {
  [s, rx] = await Promise.all([startTestServer(), startWebhookReceiver()]);
  const target = await s.api('POST', '/acme/webhook-targets', { body: { url: rx.url(PATH), events: KINDS } });
  if (target.status !== 201) throw new Error(`webhook target: ${target.status} ${target.text}`);
  rx.setSecret(PATH, target.json.secret);
});
t.teardown(async () => {
  await rx.close();
  await s.stop();
  s.cleanup();
});

function eventsOf(repo: string): EventEnvelope[] {
  return rx.unique(PATH).map((d) => d.body as EventEnvelope).filter((e) => e.repository?.name === repo);
}

let markers = 0;

/**
 * Waits until every event of `repo` written so far has arrived, and returns how many there are:
 * it creates a marker bookmark and waits for its event (one repository's deliveries are sent in
 * event order, so nothing written before the marker can still be on its way).
 */
async function checkpoint(repo: string): Promise<number> {
  const marker = `marker-${++markers}`;
  await s.api('POST', `/acme/${repo}/bookmarks`, { body: { name: marker, change_id: ROOT } });
  const isMarker = (e: EventEnvelope): boolean => e.type === 'bookmark.created' && (e.data.bookmark as { name: string }).name === marker;
  await rx.waitFor(() => eventsOf(repo).some(isMarker), 10_000, marker);
  return eventsOf(repo).findIndex(isMarker) + 1;
}

/** The events of `repo` written after the checkpoint that counted `seen`, up to now. */
async function eventsSince(repo: string, seen: number): Promise<EventEnvelope[]> {
  const end = await checkpoint(repo);
  return eventsOf(repo).slice(seen, end - 1);
}

const isMarkerOp = (op: OperationRecord): boolean => op.kind === 'bookmark.create' && String(op.summary.name).startsWith('marker-');

async function commitOf(repo: string, changeId: string): Promise<string> {
  return (await s.api('GET', `/acme/${repo}/changes/${changeId}`)).json.current_commit_oid;
}

t.test('events - create, move, merge and delete announce the bookmark with the mutation', async (t) => {
  await createRepo(s, 'ev');
  const id = await repoId(s, 'ev');
  const c1 = await write(s, 'ev', ROOT, { 'a.txt': 'a\n' });
  const oid1 = await commitOf('ev', c1);

  let seen = await checkpoint('ev');
  const opsBefore = operations(s, id).length;
  await s.api('POST', '/acme/ev/bookmarks', { body: { name: 'feat/x', change_id: c1 } });
  let events = await eventsSince('ev', seen);
  t.same(events.map((e) => e.type), ['bookmark.created']);
  t.same(events[0]?.data, { bookmark: { name: 'feat/x', is_default: false, change_id: c1, commit_oid: oid1 } });
  t.match(events[0], { id: /^evt_/, organization: { slug: 'acme' }, repository: { id, name: 'ev' } });

  const c2 = await write(s, 'ev', c1, { 'b.txt': 'b\n' });
  const oid2 = await commitOf('ev', c2);
  seen = await checkpoint('ev');
  await s.api('PATCH', '/acme/ev/bookmarks/feat%2Fx', { body: { change_id: c2 } });
  events = await eventsSince('ev', seen);
  t.same(events.map((e) => e.type), ['bookmark.moved']);
  t.same(events[0]?.data, {
    bookmark: { name: 'feat/x', is_default: false, change_id: c2, commit_oid: oid2 },
    from: { change_id: c1, commit_oid: oid1 },
  });

  seen = await checkpoint('ev');
  t.equal((await s.api('PATCH', '/acme/ev/bookmarks/feat%2Fx', { body: { change_id: c1 } })).status, 409);
  t.equal((await s.api('PATCH', '/acme/ev/bookmarks/feat%2Fx', { body: { change_id: c2 } })).status, 200);
  t.same(await eventsSince('ev', seen), [], 'a refused move and a move onto the current target announce nothing');

  seen = await checkpoint('ev');
  const merged = await s.api('POST', '/acme/ev/bookmarks/merge', { body: { target: 'main', source: 'feat/x', delete_source: true } });
  t.equal(merged.status, 200);
  events = await eventsSince('ev', seen);
  t.same(events.map((e) => e.type), ['change.created', 'bookmark.merged', 'bookmark.deleted'], 'no separate bookmark.moved for the target');
  t.match(events[0]?.data, { change: { id: merged.json.change_id, parents: [c1, c2], current_commit_oid: merged.json.commit_oid } });
  t.same(events[1]?.data, { bookmark: { name: 'main', is_default: true, change_id: merged.json.change_id, commit_oid: merged.json.commit_oid } });
  t.same(events[2]?.data, { bookmark: { name: 'feat/x', is_default: false, change_id: c2, commit_oid: oid2 } });

  seen = await checkpoint('ev');
  await s.api('DELETE', '/acme/ev/bookmarks/marker-1');
  events = await eventsSince('ev', seen);
  t.same(events.map((e) => e.type), ['bookmark.deleted']);
  t.same(events[0]?.data, { bookmark: { name: 'marker-1', is_default: false, change_id: ROOT, commit_oid: '0'.repeat(40) } });

  const kinds = operations(s, id)
    .slice(opsBefore)
    .filter((op) => !isMarkerOp(op) && op.kind.startsWith('bookmark.'))
    .map((op) => op.kind);
  t.same(kinds, ['bookmark.create', 'bookmark.move', 'bookmark.merge', 'bookmark.delete'], 'one operation per bookmark mutation');
  const mergeOp = operations(s, id).find((op) => op.kind === 'bookmark.merge');
  t.match(mergeOp?.summary, { target: 'main', source: 'feat/x', change_id: merged.json.change_id, source_deleted: true });
});

t.test('events - a refused merge, a no-op merge and a refused delete announce nothing and record nothing', async (t) => {
  await createRepo(s, 'quiet');
  const id = await repoId(s, 'quiet');
  const base = await write(s, 'quiet', ROOT, { 'a.txt': '1\n' });
  const left = await write(s, 'quiet', base, { 'a.txt': 'left\n' });
  const right = await write(s, 'quiet', base, { 'a.txt': 'right\n' });
  await s.api('PATCH', '/acme/quiet/bookmarks/main', { body: { change_id: left } });
  await s.api('POST', '/acme/quiet/bookmarks', { body: { name: 'right', change_id: right } });
  await s.api('POST', '/acme/quiet/bookmarks', { body: { name: 'old', change_id: base } });
  const seen = await checkpoint('quiet');
  const ops = operations(s, id).length;
  t.equal((await s.api('POST', '/acme/quiet/bookmarks/merge', { body: { target: 'main', source: 'right' } })).status, 409);
  t.equal((await s.api('POST', '/acme/quiet/bookmarks/merge', { body: { target: 'main', source: 'old' } })).json.merge_type, 'no_op');
  t.equal((await s.api('DELETE', '/acme/quiet/bookmarks/main')).status, 400);
  t.equal(operations(s, id).length, ops);
  t.same(await eventsSince('quiet', seen), []);
});
