import t from 'tap';
import { applyOps, createRepo, enqueue, pullAndWait, startSyncEnv, waitForSync, type SyncEnv } from './fixtures.js';
import { ROOT_CHANGE_ID } from '../../src/vcs/ids.js';
import { FLUSH, answerAdvertisement, answerResult, pkt, startFakeUpstream, type FakeUpstream } from './fake-upstream.js';

/**
 * A sync's `error` (API §9) is our description of what went wrong, never the upstream's words:
 * an upstream on loopback answers with a distinctive string in every place an answer can carry
 * text, and neither the sync records nor the server's log may contain it.
 */
const MARK = 'SENTINEL-7f3a-upstream-said-this';
const OID = 'c0ffee'.padEnd(40, '0');
const REFS = { HEAD: OID, 'refs/heads/main': OID };

let env: SyncEnv;
let fake: FakeUpstream;
t.before(async () => {
  env = await startSyncEnv();
  fake = await startFakeUpstream();
});
t.teardown(async () => {
  await fake.close();
  await env.close();
});

const cases: Array<{ name: string; what: string; repo: Parameters<FakeUpstream['set']>[1]; error: string }> = [
  {
    name: 'status-body',
    what: 'an error status with a body and its own reason phrase',
    repo: { discovery: (res) => void res.writeHead(401, MARK, { 'content-type': 'text/plain' }).end(`${MARK}\n`) },
    error: 'the upstream refused the credentials (HTTP 401 Unauthorized)',
  },
  {
    name: 'web-page',
    what: 'a web page instead of a ref advertisement',
    repo: { discovery: (res) => void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body>${MARK}</body></html>`) },
    error: 'the upstream did not answer as a git smart-HTTP server (no ref advertisement)',
  },
  {
    name: 'bad-advertisement',
    what: 'a malformed ref advertisement',
    repo: { discovery: (res, service) => void res.writeHead(200, { 'content-type': `application/x-${service}-advertisement` }).end(Buffer.concat([pkt(`${MARK}\n`), FLUSH])) },
    error: 'the upstream sent a malformed ref advertisement',
  },
  {
    name: 'err-packet',
    what: 'an ERR packet',
    repo: {
      discovery: (res, service) => answerAdvertisement(res, service, REFS, ['ofs-delta']),
      uploadPack: (res) => answerResult(res, 'git-upload-pack', pkt(`ERR ${MARK}\n`)),
    },
    error: 'the upstream refused the fetch (it answered with an error packet)',
  },
  {
    name: 'fatal-sideband',
    what: 'a fatal side-band message',
    repo: {
      discovery: (res, service) => answerAdvertisement(res, service, REFS, ['ofs-delta', 'side-band-64k']),
      uploadPack: (res) => answerResult(res, 'git-upload-pack', Buffer.concat([pkt('NAK\n'), pkt(Buffer.concat([Buffer.from([3]), Buffer.from(`fatal: ${MARK}\n`)])), FLUSH])),
    },
    error: 'the remote reported a fatal error on its side-band channel',
  },
  {
    name: 'garbage-answer',
    what: 'text instead of ACK or NAK',
    repo: {
      discovery: (res, service) => answerAdvertisement(res, service, REFS, ['ofs-delta']),
      uploadPack: (res) => answerResult(res, 'git-upload-pack', pkt(`${MARK}\n`)),
    },
    error: 'the upstream answered the fetch with something other than ACK or NAK',
  },
];

for (const c of cases) {
  t.test(`error text - a pull meeting ${c.what} fails in our words, without the upstream's`, async (t) => {
    fake.set(c.name, c.repo);
    await createRepo(env.s, c.name, { url: fake.url(c.name) });
    const sync = await pullAndWait(env.s, c.name);
    t.equal(sync.status, 'failed');
    t.equal(sync.error, c.error);
  });
}

t.test("error text - a push whose unpack fails is reported without the upstream's reason", async (t) => {
  fake.set('push-refused', {
    discovery: (res, service) => answerAdvertisement(res, service, { 'capabilities^{}': '0'.repeat(40) }, ['report-status', 'side-band-64k']),
    receivePack: (res) => {
      const report = Buffer.concat([pkt(`unpack ${MARK}\n`), pkt(`ng refs/heads/main ${MARK}\n`), FLUSH]);
      answerResult(res, 'git-receive-pack', Buffer.concat([pkt(Buffer.concat([Buffer.from([1]), report])), FLUSH]));
    },
  });
  await createRepo(env.s, 'push-refused', { url: fake.url('push-refused') });
  await applyOps(env.s, 'push-refused', { base_change_id: ROOT_CHANGE_ID, message: 'a file', ops: [{ op: 'write', path: 'a.txt', content: 'a\n' }], bookmarks: [{ name: 'main' }] });
  const sync = await waitForSync(env.s, 'push-refused', (await enqueue(env.s, 'push-refused', { direction: 'push' })).id);
  t.equal(sync.status, 'failed');
  t.equal(sync.error, 'the upstream could not store the pushed objects (its unpack failed)');
});

t.test("error text - the upstream's text is in no sync record, event or log line", async (t) => {
  const runs = await env.s.api('GET', '/acme/sync-runs?limit=100');
  t.equal(runs.status, 200);
  t.equal(runs.json.sync_runs.length, cases.length + 1, 'every failed sync is listed');
  t.notOk(runs.text.includes(MARK), 'not in the sync records');
  t.notOk(JSON.stringify(env.rx.received(env.hookPath).map((d) => d.raw)).includes(MARK), 'not in any event');
  t.notOk(env.s.logs.join('\n').includes(MARK), 'not in the log');
});
